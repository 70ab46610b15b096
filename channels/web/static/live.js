/* Pizza Bot web inbox: refresh regions marked data-live by polling their HTML fragment.
   Optional: every page works without it. A region with data-reload reloads the page when its
   data-version changes (e.g. an item was decided elsewhere), so forms never go stale. */
(function () {
  "use strict";
  if (!window.fetch || !document.querySelectorAll) return;
  var EVERY_MS = 4000;

  function poll(el) {
    if (document.hidden) return;
    fetch(el.getAttribute("data-live"), {
      credentials: "same-origin",
      headers: { "Accept": "text/html", "X-Requested-With": "live" }
    })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) return;
        var box = document.createElement("div");
        box.innerHTML = html;
        var fresh = box.firstElementChild;
        if (!fresh) return;
        var was = el.getAttribute("data-version");
        var now = fresh.getAttribute("data-version");
        if (el.hasAttribute("data-reload") && now !== null && was !== now) {
          window.location.reload();
          return;
        }
        if (fresh.innerHTML !== el.innerHTML) el.innerHTML = fresh.innerHTML;
        var title = fresh.getAttribute("data-title");
        if (title) document.title = title;
      })
      .catch(function () { /* offline for a moment: try again next time */ });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var regions = document.querySelectorAll("[data-live]");
    Array.prototype.forEach.call(regions, function (el) {
      window.setInterval(function () { poll(el); }, EVERY_MS);
    });
    // A push arrived (app.js hears it from the service worker): look now, not in 4 s.
    document.addEventListener("pizzabot:refresh", function () {
      Array.prototype.forEach.call(regions, function (el) { poll(el); });
    });
  });
})();
