// Tells the server the browser's time zone: the default for a user who chose none.
(function () {
  "use strict";
  var zone;
  try {
    zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  } catch (e) {
    return;
  }
  // IANA names (Asia/Shanghai, America/Argentina/Buenos_Aires) are cookie-safe as written.
  if (!zone || !/^[A-Za-z0-9_+\/-]+$/.test(zone)) return;
  var wanted = "tz=" + zone;
  if (document.cookie.split("; ").indexOf(wanted) !== -1) return;
  document.cookie = wanted + "; path=/; max-age=31536000; SameSite=Lax";
})();
