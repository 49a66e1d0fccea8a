// The console's only script; every page works without it. It asks before
// a form marked data-confirm is sent, and keeps the switches page's values
// live from the hub's own event feed (/console/events, server-sent
// events).
"use strict";

document.addEventListener("submit", function (e) {
  var form = e.target;
  var question = form.getAttribute("data-confirm");
  if (!question) {
    return;
  }
  if (!window.confirm(question)) {
    e.preventDefault();
    return;
  }
  // Asked and answered here: the hub need not ask again on a page of its
  // own (which it does when scripts are off).
  if (!form.querySelector('input[name="confirmed"]')) {
    var yes = document.createElement("input");
    yes.type = "hidden";
    yes.name = "confirmed";
    yes.value = "yes";
    form.appendChild(yes);
  }
}, true);

document.addEventListener("DOMContentLoaded", function () {
  var table = document.querySelector("[data-live]");
  if (!table || !window.EventSource) {
    return;
  }
  var status = document.getElementById("live-status");
  var source = new EventSource(table.getAttribute("data-live"));
  source.addEventListener("open", function () {
    if (status) { status.textContent = "Live: values update as they change."; }
  });
  source.addEventListener("error", function () {
    if (status) { status.textContent = "Not live: reload the page for current values."; }
  });
  source.addEventListener("switch", function (e) {
    var ev;
    try { ev = JSON.parse(e.data); } catch (err) { return; }
    var row = document.querySelector('tr[data-switch="' + CSS.escape(ev.id) + '"]');
    if (!row) { return; }
    var set = function (field, text, cls) {
      var cell = row.querySelector('[data-field="' + field + '"]');
      if (cell) {
        cell.textContent = text;
        if (cls !== undefined) { cell.className = cls; }
      }
    };
    set("value", ev.value || "unknown", ev.value ? "value-" + ev.value : "");
    set("available", ev.available ? "yes" : "no", ev.available ? "" : "problem");
    set("last_seen", ev.last_seen || "never");
    if (ev.power !== undefined) { set("power", ev.power); }
  });
});
