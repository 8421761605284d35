// Spear console: the live parts. Every page is whole without this script;
// it keeps the page's [data-live] regions current. The server says what
// changed over server-sent events (/events); the script then re-reads the
// page (the URL in <main data-src>) and swaps in the regions it holds.
// It never builds markup from data: what it inserts was rendered, and
// escaped, by SMS.
(function () {
  "use strict";
  // A page that only hands over to another site (an OAuth login) names
  // the link to follow.
  var follow = document.querySelector("a[data-follow]");
  if (follow) {
    window.location.assign(follow.href);
    return;
  }
  var main = document.getElementById("main");
  var status = document.getElementById("live");
  var regions = document.querySelectorAll("[data-live]");
  if (!main || regions.length === 0 || !window.EventSource) {
    return;
  }
  var source = main.getAttribute("data-src") || location.pathname + location.search;
  var topics = {};
  regions.forEach(function (region) {
    region.getAttribute("data-live").split(" ").forEach(function (t) {
      if (t) { topics[t] = true; }
    });
  });
  var busy = false;
  var again = false;

  function swap(text) {
    var fresh = new DOMParser().parseFromString(text, "text/html");
    document.querySelectorAll("[data-live]").forEach(function (region) {
      var next = fresh.getElementById(region.id);
      // Never under someone's cursor: a form being filled in stays.
      if (!next || region.contains(document.activeElement)) {
        return;
      }
      var nodes = Array.prototype.map.call(next.childNodes, function (n) {
        return document.importNode(n, true);
      });
      region.replaceChildren.apply(region, nodes);
    });
    document.body.setAttribute("data-refreshed", String(Date.now()));
  }

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(source, { credentials: "same-origin", headers: { "X-Console-Live": "1" } })
      .then(function (response) {
        if (response.redirected || !response.ok) {
          throw new Error("the console answered " + response.status);
        }
        return response.text();
      })
      .then(swap)
      .catch(function (error) {
        if (status) { status.textContent = "not live: " + error.message; }
      })
      .finally(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }

  var events = new EventSource("/events?topics=" + Object.keys(topics).join(","));
  Object.keys(topics).forEach(function (topic) {
    events.addEventListener(topic, refresh);
  });
  // Opened (or opened again after a drop): read the page once, so a
  // change made between its render and this moment (whose event went to
  // no one) is shown too.
  events.onopen = function () {
    if (status) { status.textContent = "live"; }
    document.body.setAttribute("data-live-open", "1");
    refresh();
  };
  events.onerror = function () {
    if (status) { status.textContent = "reconnecting…"; }
  };

  // Forms that ask before they act (delete, deny).
  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      if (!window.confirm(form.getAttribute("data-confirm"))) {
        event.preventDefault();
      }
    });
  });
})();
