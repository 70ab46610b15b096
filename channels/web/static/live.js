/* Pizza Bot web inbox: keep the regions marked data-live up to date with a long-poll.
   Optional: every page works without it. Each region asks for its HTML fragment with the
   fingerprint of what it shows (seen=) and a wait; the server answers at once when the
   fragment differs, else holds the ask until the inbox changes or the wait ends (204). Then
   the region asks again at once; after an error it waits longer each time (up to a minute),
   and while the tab is hidden it does not ask at all. A region with data-reload reloads the
   page when its data-version changes (e.g. an item was decided elsewhere), so forms never go
   stale. data-live-wait sets a region's wait in seconds (default 25). */
(function () {
  "use strict";
  if (!window.fetch || !document.querySelectorAll) return;
  var WAIT = 25;
  var RETRY_FIRST_MS = 1000, RETRY_MAX_MS = 60000;
  // An answer that came back at once and unchanged means nobody held it (a proxy, an old
  // server): ask again only after this long, not in a tight loop.
  var QUICK_MS = 1000, UNHELD_MS = 4000;
  // Set once a form on the page is sent: no region asks or reloads after that.
  var leaving = false;

  function Region(el) {
    this.el = el;
    this.seen = "";
    this.retry = 0;
    this.asking = null; // the AbortController of the ask in flight, or true without one
    this.timer = null;
  }

  function address(r) {
    var url = r.el.getAttribute("data-live");
    var wait = r.el.getAttribute("data-live-wait") || WAIT;
    return url + (url.indexOf("?") < 0 ? "?" : "&") +
      "seen=" + encodeURIComponent(r.seen) + "&wait=" + encodeURIComponent(wait);
  }

  function show(r, html) {
    var box = document.createElement("div");
    box.innerHTML = html;
    var fresh = box.firstElementChild;
    if (!fresh) return;
    var was = r.el.getAttribute("data-version");
    var now = fresh.getAttribute("data-version");
    if (leaving) return;
    if (r.el.hasAttribute("data-reload") && now !== null && was !== now) {
      window.location.reload();
      return;
    }
    if (fresh.innerHTML !== r.el.innerHTML) r.el.innerHTML = fresh.innerHTML;
    var title = fresh.getAttribute("data-title");
    if (title) document.title = title;
  }

  function later(r, ms) {
    window.clearTimeout(r.timer);
    r.timer = window.setTimeout(function () { r.timer = null; ask(r); }, ms);
  }

  function stop(r) {
    window.clearTimeout(r.timer);
    r.timer = null;
    var asking = r.asking;
    r.asking = null;
    if (asking && asking !== true) asking.abort();
  }

  function ask(r) {
    if (document.hidden || r.asking || leaving) return;
    window.clearTimeout(r.timer);
    r.timer = null;
    var ctl = window.AbortController ? new AbortController() : null;
    var mine = ctl || true;
    r.asking = mine;
    var started = Date.now(), before = r.seen;
    fetch(address(r), {
      credentials: "same-origin",
      cache: "no-store",
      headers: { "Accept": "text/html", "X-Requested-With": "live" },
      signal: ctl ? ctl.signal : undefined
    })
      .then(function (resp) {
        if (resp.status === 204) return null;
        if (!resp.ok) throw new Error("HTTP " + resp.status);
        var version = resp.headers.get("X-Live-Version") || "";
        return resp.text().then(function (html) { return { html: html, version: version }; });
      })
      .then(function (got) {
        if (r.asking !== mine) return; // stopped or replaced meanwhile
        r.asking = null;
        r.retry = 0;
        var changed = got !== null && got.version !== before;
        if (got !== null) { r.seen = got.version; show(r, got.html); }
        var quick = Date.now() - started < QUICK_MS;
        if (!changed && quick) later(r, UNHELD_MS); else ask(r);
      })
      .catch(function () {
        if (r.asking !== mine) return; // aborted on purpose
        r.asking = null;
        r.retry = r.retry ? Math.min(RETRY_MAX_MS, r.retry * 2) : RETRY_FIRST_MS;
        later(r, r.retry); // offline, signed out, or too many asks held: try again later
      });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var regions = Array.prototype.map.call(
      document.querySelectorAll("[data-live]"), function (el) { return new Region(el); });
    regions.forEach(ask);
    // Hidden: let the server go of the held asks; shown again: look at once.
    document.addEventListener("visibilitychange", function () {
      regions.forEach(document.hidden ? stop : ask);
    });
    // A push arrived (app.js hears it from the service worker): ask anew now.
    document.addEventListener("pizzabot:refresh", function () {
      if (!leaving) regions.forEach(function (r) { stop(r); ask(r); });
    });
    // A form sent from this page decides what shows next (its answer, with its message):
    // the page's own change must not reload it from under that navigation.
    document.addEventListener("submit", function (e) {
      if (e.defaultPrevented) return;
      leaving = true;
      regions.forEach(stop);
    });
  });
})();
