/* Pizza Bot's service worker: the installed app's shell, and its push notifications.
   It caches only the shell (styles, scripts, icons, the offline page), never a page with a
   card on it: cards come from the server each time, so nothing of one stays on the device
   after a logout. A push says only that a card waits and carries an opaque id; the page
   turns it into the card once signed in (/push/open/ID). A notification's Approve and Reject
   open the card with that choice offered: nothing is decided until the person confirms it
   there (and, where the card asks for one, with a passkey). */
"use strict";

var SHELL = "pizzabot-shell-v1";
var BASE = new URL(self.registration.scope).pathname.replace(/\/$/, "");
var FILES = [
  "/static/web.css", "/static/live.js", "/static/app.js",
  "/static/icon-192.png", "/static/icon-512.png", "/offline"
].map(function (p) { return BASE + p; });

self.addEventListener("install", function (e) {
  e.waitUntil(caches.open(SHELL).then(function (c) { return c.addAll(FILES); })
    .then(function () { return self.skipWaiting(); }));
});

self.addEventListener("activate", function (e) {
  e.waitUntil(caches.keys().then(function (names) {
    return Promise.all(names.filter(function (n) { return n !== SHELL; })
      .map(function (n) { return caches.delete(n); }));
  }).then(function () { return self.clients.claim(); }));
});

self.addEventListener("fetch", function (e) {
  var req = e.request, url = new URL(req.url);
  if (req.method !== "GET" || url.origin !== self.location.origin) return;
  if (url.pathname.indexOf(BASE + "/static/") === 0) {
    // The shell: from the network when it answers (kept fresh), else the kept copy.
    e.respondWith(fetch(req).then(function (r) {
      if (r.ok) { var copy = r.clone(); caches.open(SHELL).then(function (c) { c.put(req, copy); }); }
      return r;
    }).catch(function () { return caches.match(req); }));
  } else if (req.mode === "navigate") {
    // A page: always the server's; the offline page when there is no connection.
    e.respondWith(fetch(req).catch(function () { return caches.match(BASE + "/offline"); }));
  }
});

self.addEventListener("push", function (e) {
  var data = {};
  try { data = e.data ? e.data.json() : {}; } catch (err) { data = {}; }
  var open = typeof data.open === "string" ? data.open : "";
  var shown = self.registration.showNotification("Pizza Bot", {
    body: typeof data.text === "string" ? data.text : "1 card waits",
    tag: "pizzabot-" + open,
    icon: BASE + "/static/icon-192.png",
    badge: BASE + "/static/icon-192.png",
    data: { open: open },
    actions: [{ action: "approve", title: "Approve" }, { action: "reject", title: "Reject" }]
  });
  var told = self.clients.matchAll({ type: "window" }).then(function (windows) {
    windows.forEach(function (w) { w.postMessage({ kind: "card" }); });
  });
  e.waitUntil(Promise.all([shown, told]));
});

function target(open, action) {
  var url = BASE + "/push/open/" + encodeURIComponent(open);
  return action === "approve" || action === "reject" ? url + "?act=" + action : url;
}

self.addEventListener("notificationclick", function (e) {
  e.notification.close();
  var open = (e.notification.data && e.notification.data.open) || "";
  var url = open ? target(open, e.action) : BASE + "/";
  e.waitUntil(self.clients.matchAll({ type: "window", includeUncontrolled: true })
    .then(function (windows) {
      for (var i = 0; i < windows.length; i++) {
        if ("navigate" in windows[i]) {
          return windows[i].navigate(url).then(function (w) { return w && w.focus(); });
        }
      }
      return self.clients.openWindow(url);
    }));
});
