// Keyboard focus across htmx swaps. The incident screen swaps its live parts every 30 s:
// whatever had focus there keeps it, and the <details> someone opened stay open. htmx
// refocuses an element that keeps its id; one without an id is found again by its place
// among the focusable elements of the swapped region. And after a failed save through
// the Save button (a submit, not an autosave on change, which must not take the focus
// from the field being typed in), focus moves to the error summary, as it does on a
// page load through the summary's autofocus.
(function () {
  "use strict";
  var FOCUSABLE = "a[href], button, input, select, textarea, summary, [tabindex]";
  var kept = null;

  document.addEventListener("htmx:beforeSwap", function (event) {
    var region = event.detail.target;
    var active = document.activeElement;
    kept = {
      opened: Array.prototype.map.call(region.querySelectorAll("details[open][id]"), function (d) { return d.id; }),
      id: active && region.contains(active) ? active.id : "",
      index: active && region.contains(active) ? Array.prototype.indexOf.call(region.querySelectorAll(FOCUSABLE), active) : -1,
      regionId: region.id
    };
  });

  document.addEventListener("htmx:afterSwap", function () {
    if (!kept) { return; }
    var state = kept;
    kept = null;
    state.opened.forEach(function (id) {
      var details = document.getElementById(id);
      if (details && details.tagName === "DETAILS") { details.open = true; }
    });
    if (state.index < 0 || (document.activeElement && document.activeElement !== document.body)) { return; }
    var again = state.id ? document.getElementById(state.id) : null;
    var region = document.getElementById(state.regionId);
    if (!again && region) { again = region.querySelectorAll(FOCUSABLE)[state.index] || null; }
    if (again) { again.focus({ preventScroll: true }); }
  });

  document.addEventListener("htmx:afterSettle", function (event) {
    var config = event.detail.requestConfig;
    var trigger = config && config.triggeringEvent;
    if (!trigger || trigger.type !== "submit") { return; }
    var summary = document.getElementById("error-summary");
    if (summary) { summary.focus(); }
  });
})();
