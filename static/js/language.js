// With scripts, the language switcher switches as soon as a language is picked; its
// button stays for pages read without JavaScript.
document.addEventListener("DOMContentLoaded", function () {
  "use strict";
  document.querySelectorAll("form.language").forEach(function (form) {
    var select = form.querySelector("select");
    if (!select) return;
    form.classList.add("switches-on-change");
    select.addEventListener("change", function () {
      form.requestSubmit();
    });
  });
});
