// Printing opens every closed <details> (a fingerprint, a sample's output) and
// closes them again afterwards. ledger.css does it without a script where the
// browser supports ::details-content; this covers the others.
(function () {
  "use strict";
  var opened = [];
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details:not([open])").forEach(function (details) {
      details.open = true;
      opened.push(details);
    });
  });
  window.addEventListener("afterprint", function () {
    opened.forEach(function (details) { details.open = false; });
    opened = [];
  });
})();
