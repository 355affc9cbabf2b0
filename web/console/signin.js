// The page a one-time sign-in link opens (`stoker console`; docs/console.md).
// The link's code is in the URL's fragment, which the browser never sends to
// a server: this script posts it to /console/session, which opens a session
// (the cookie) once, and goes on to the console. The fragment is cleared
// first, so the code does not stay in the address bar or the history.
"use strict";

(async function signInWithLink() {
  const status = document.getElementById("link-status");
  const code = new URLSearchParams(location.hash.slice(1)).get("code") || "";
  history.replaceState(null, "", location.pathname);
  if (!/^[0-9a-f]{64}$/.test(code)) {
    status.textContent = "This link has no sign-in code. Run 'stoker console' for a new one.";
    status.className = "error";
    return;
  }
  try {
    const r = await fetch("/console/session", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ link: code }),
    });
    if (r.ok) {
      location.replace("/#/jobs");
      return;
    }
    const body = await r.json().catch(() => ({}));
    status.textContent = (body.error && body.error.message) || "Sign-in failed (HTTP " + r.status + ").";
  } catch (e) {
    status.textContent = "Sign-in failed: " + e.message;
  }
  status.className = "error";
})();
