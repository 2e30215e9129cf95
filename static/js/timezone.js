// Tells the server the browser's time zone: the default for a user who chose none.
(function () {
  "use strict";
  var zone;
  try {
    zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  } catch (e) {
    return;
  }
  if (!zone) return;
  var wanted = "tz=" + encodeURIComponent(zone);
  if (document.cookie.split("; ").indexOf(wanted) !== -1) return;
  document.cookie = wanted + "; path=/; max-age=31536000; SameSite=Lax";
})();
