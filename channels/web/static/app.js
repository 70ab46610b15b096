/* Pizza Bot web inbox as a phone's app. Optional: every page works without it, but push
   notifications and passkeys need a script, so those controls show only when it runs.
   - registers the service worker (sw.js: the shell for a flaky connection, push notifications)
   - offers the browser's install prompt
   - Phone page: turns notifications on for this browser, adds a passkey
   - login page: signs in with a passkey
   - a card that needs a passkey: the approve and edit forms first get the passkey's answer
     to a challenge bound to the card, then post as usual (the server checks it). */
(function () {
  "use strict";
  var body = document.body;
  var ROOT = (body && body.getAttribute("data-root")) || "";
  var CSRF = (body && body.getAttribute("data-csrf")) || "";

  function b64urlToBytes(text) {
    var b64 = text.replace(/-/g, "+").replace(/_/g, "/");
    while (b64.length % 4) b64 += "=";
    var raw = atob(b64), out = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
    return out;
  }

  function bytesToB64url(buffer) {
    var bytes = new Uint8Array(buffer), raw = "";
    for (var i = 0; i < bytes.length; i++) raw += String.fromCharCode(bytes[i]);
    return btoa(raw).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function post(url, fields) {
    var form = new URLSearchParams();
    form.set("csrf", CSRF);
    Object.keys(fields || {}).forEach(function (k) { form.set(k, fields[k]); });
    return fetch(url, { method: "POST", body: form, credentials: "same-origin" })
      .then(function (r) {
        return r.json().catch(function () { return {}; }).then(function (data) {
          if (!r.ok) throw new Error(data.error || ("the server answered " + r.status));
          return data;
        });
      });
  }

  function say(el, text) {
    if (!el) return;
    el.textContent = text || "";
    el.hidden = !text;
    el.classList.toggle("error", !!text);
  }

  /* -- WebAuthn: the server's JSON options to the browser's, its answer back to JSON ------ */

  function descriptors(list) {
    return (list || []).map(function (d) {
      return { type: d.type, id: b64urlToBytes(d.id), transports: d.transports };
    });
  }

  function creationOptions(o) {
    var opts = Object.assign({}, o);
    opts.challenge = b64urlToBytes(o.challenge);
    opts.user = Object.assign({}, o.user, { id: b64urlToBytes(o.user.id) });
    opts.excludeCredentials = descriptors(o.excludeCredentials);
    return opts;
  }

  function requestOptions(o) {
    var opts = Object.assign({}, o);
    opts.challenge = b64urlToBytes(o.challenge);
    opts.allowCredentials = descriptors(o.allowCredentials);
    return opts;
  }

  function credentialJSON(cred) {
    if (typeof cred.toJSON === "function") return JSON.stringify(cred.toJSON());
    var r = cred.response, response = { clientDataJSON: bytesToB64url(r.clientDataJSON) };
    if (r.attestationObject) {
      response.attestationObject = bytesToB64url(r.attestationObject);
      response.transports = r.getTransports ? r.getTransports() : [];
    } else {
      response.authenticatorData = bytesToB64url(r.authenticatorData);
      response.signature = bytesToB64url(r.signature);
      if (r.userHandle) response.userHandle = bytesToB64url(r.userHandle);
    }
    return JSON.stringify({
      id: cred.id, rawId: bytesToB64url(cred.rawId), type: cred.type, response: response,
      clientExtensionResults: cred.getClientExtensionResults(),
      authenticatorAttachment: cred.authenticatorAttachment || undefined
    });
  }

  var hasPasskeys = !!(window.PublicKeyCredential && navigator.credentials);

  /* -- the service worker, the install prompt, refresh on a push -------------------------- */

  if ("serviceWorker" in navigator && window.isSecureContext) {
    navigator.serviceWorker.register(ROOT + "/sw.js", { scope: ROOT + "/" }).catch(function () {});
    navigator.serviceWorker.addEventListener("message", function (e) {
      if (e.data && e.data.kind === "card") document.dispatchEvent(new Event("pizzabot:refresh"));
    });
  }

  var installPrompt = null;
  window.addEventListener("beforeinstallprompt", function (e) {
    e.preventDefault();
    installPrompt = e;
    document.querySelectorAll("[data-install]").forEach(function (b) { b.hidden = false; });
  });

  function onInstall(button) {
    button.addEventListener("click", function () {
      if (!installPrompt) return;
      installPrompt.prompt();
      installPrompt = null;
      button.hidden = true;
    });
  }

  /* -- notifications (the Phone page) ----------------------------------------------------- */

  function pushControls(section) {
    var key = section.getAttribute("data-push-key");
    var error = section.querySelector("[data-push-error]");
    var button = section.querySelector("[data-push-on]");
    if (!key || !button || !("PushManager" in window) || !("serviceWorker" in navigator)) return;
    section.querySelector(".push-controls").hidden = false;
    button.addEventListener("click", function () {
      say(error, "");
      Notification.requestPermission()
        .then(function (p) {
          if (p !== "granted") throw new Error("notifications are blocked for this site");
          return navigator.serviceWorker.ready;
        })
        .then(function (reg) {
          return reg.pushManager.subscribe({
            userVisibleOnly: true, applicationServerKey: b64urlToBytes(key)
          });
        })
        .then(function (sub) {
          return post(section.getAttribute("data-push-add"), {
            subscription: JSON.stringify(sub.toJSON ? sub.toJSON() : sub),
            label: deviceLabel()
          });
        })
        .then(function () { window.location.reload(); })
        .catch(function (e) { say(error, "Notifications could not be turned on: " + e.message); });
    });
  }

  function deviceLabel() {
    var ua = navigator.userAgent, browser = "a browser", system = "";
    if (/Edg\//.test(ua)) browser = "Edge"; else if (/Chrom/.test(ua)) browser = "Chrome";
    else if (/Firefox\//.test(ua)) browser = "Firefox"; else if (/Safari\//.test(ua)) browser = "Safari";
    if (/Android/.test(ua)) system = "Android"; else if (/iPhone|iPad/.test(ua)) system = "iOS";
    else if (/Mac OS X/.test(ua)) system = "macOS"; else if (/Windows/.test(ua)) system = "Windows";
    else if (/Linux/.test(ua)) system = "Linux";
    return system ? browser + " on " + system : browser;
  }

  /* -- passkeys: add one, sign in with one, confirm a card with one ----------------------- */

  function passkeyAdd(section) {
    var error = section.querySelector("[data-passkey-error]");
    var button = section.querySelector("[data-passkey-on]");
    if (!button || !hasPasskeys) return;
    section.querySelector(".passkey-controls").hidden = false;
    var url = section.getAttribute("data-passkey-add");
    button.addEventListener("click", function () {
      say(error, "");
      var name = (section.querySelector("#passkey-name") || {}).value || "";
      post(url + "/options")
        .then(function (o) {
          return navigator.credentials.create({ publicKey: creationOptions(o.options) })
            .then(function (cred) {
              return post(url, { nonce: o.nonce, credential: credentialJSON(cred), name: name });
            });
        })
        .then(function () { window.location.reload(); })
        .catch(function (e) { say(error, "The passkey was not added: " + e.message); });
    });
  }

  function passkeyLogin(box) {
    if (!hasPasskeys) return;
    box.hidden = false;
    var url = box.getAttribute("data-passkey-login"), error = box.querySelector("[data-passkey-error]");
    box.querySelector("button").addEventListener("click", function () {
      say(error, "");
      post(url + "/options")
        .then(function (o) {
          return navigator.credentials.get({ publicKey: requestOptions(o.options) })
            .then(function (cred) {
              return post(url, {
                nonce: o.nonce, credential: credentialJSON(cred), next: box.getAttribute("data-next")
              });
            });
        })
        .then(function (done) { window.location.assign(done.go); })
        .catch(function (e) { say(error, "Not signed in: " + e.message); });
    });
  }

  function stepUp(section) {
    var url = section.getAttribute("data-step-up");
    var error = section.querySelector("[data-step-up-error]");
    section.querySelectorAll("form[data-confirm]").forEach(function (form) {
      form.addEventListener("submit", function (e) {
        if (form.querySelector("input[name=assertion]")) return; // answered: post it
        e.preventDefault();
        say(error, "");
        if (!hasPasskeys) { say(error, "This browser has no passkeys."); return; }
        var seen = form.querySelector("input[name=seen]").value;
        post(url, { seen: seen })
          .then(function (o) {
            return navigator.credentials.get({ publicKey: requestOptions(o.options) })
              .then(function (cred) {
                [["nonce", o.nonce], ["assertion", credentialJSON(cred)]].forEach(function (f) {
                  var input = document.createElement("input");
                  input.type = "hidden"; input.name = f[0]; input.value = f[1];
                  form.appendChild(input);
                });
                form.submit();
              });
          })
          .catch(function (err) { say(error, "Not confirmed: " + err.message); });
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-install]").forEach(onInstall);
    document.querySelectorAll("[data-push-key]").forEach(pushControls);
    document.querySelectorAll("[data-passkey-add]").forEach(passkeyAdd);
    document.querySelectorAll("[data-passkey-login]").forEach(passkeyLogin);
    document.querySelectorAll("[data-step-up]").forEach(stepUp);
  });
})();
