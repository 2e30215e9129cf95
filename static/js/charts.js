// Draws every <div data-plotly> from the JSON <script> just before it
// (templates/lib/_chart.html, lib/charts.py): on page load, and in what an htmx
// swap brings in. No inline script, so the Content-Security-Policy needs none.
(function () {
  "use strict";

  function draw(root) {
    if (typeof Plotly === "undefined") {
      // plotly.js did not load: hide the empty boxes; the tables beside them stay (ledger.css).
      document.documentElement.classList.add("charts-unavailable");
      return;
    }
    root.querySelectorAll("[data-plotly]:not([data-plotly-drawn])").forEach(function (div) {
      var spec = JSON.parse(div.previousElementSibling.textContent);
      div.setAttribute("data-plotly-drawn", "");
      Plotly.newPlot(div, spec.data, spec.layout, spec.config);
    });
  }

  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:load", function (event) { draw(event.target); });
})();
