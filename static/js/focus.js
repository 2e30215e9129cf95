// After a failed save through the release form's Save button (a submit, not an autosave
// on change, which must not take the focus from the field being typed in), focus moves
// to the error summary, as it does on a page load through the summary's autofocus.
(function () {
  "use strict";
  document.addEventListener("htmx:afterSettle", function (event) {
    var config = event.detail.requestConfig;
    var trigger = config && config.triggeringEvent;
    if (!trigger || trigger.type !== "submit") { return; }
    var summary = document.getElementById("error-summary");
    if (summary) { summary.focus(); }
  });
})();
