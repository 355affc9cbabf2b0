// The Stoker web console (docs/console.md): a page of plain modern
// JavaScript, no build step. It reads and acts through stokerd's own REST
// API with the session cookie set at sign-in; requests that change anything
// carry the X-Stoker-CSRF value the sign-in answered. Charts are small SVGs
// drawn here (chart.js). Pages live in the URL's hash: #/jobs, #/jobs/ID,
// #/compare?jobs=1,2, #/studies, #/studies/ID, #/queue, #/nodes, #/usage.
//
// This file is the entry module: sign-in, routing, start. The pages are
// modules by concern: jobs.js, job.js, compare.js, studies.js, cluster.js,
// usage.js, over util.js (DOM, formatting, the API) and chart.js.
import { api, el, newPage, show, state, stopPage } from "./util.js";
import { jobsPage } from "./jobs.js";
import { jobPage } from "./job.js";
import { studiesPage, studyPage } from "./studies.js";
import { nodesPage, queuePage } from "./cluster.js";
import { comparePage } from "./compare.js";
import { usagePage } from "./usage.js";

// ---------- sign-in ----------

function signInPage(message) {
  stopPage();
  document.getElementById("who").textContent = "";
  document.getElementById("signout").hidden = true;
  const input = el("input", {
    type: "password",
    id: "token",
    name: "token",
    autocomplete: "off",
    placeholder: "stk_…",
    size: 70,
  });
  const msg = el("p", { id: "signin-error", class: "error", role: "alert" }, message || "");
  const form = el(
    "form",
    { id: "signin", class: "card" },
    el("h1", {}, "Sign in to Stoker"),
    el("p", { class: "muted" },
      "Paste an API token. An admin issues one with ",
      el("code", {}, "stoker admin users token NAME"),
      "; the local admin's token is the file ", el("code", {}, "token"),
      " in stokerd's data directory."),
    el("label", { for: "token" }, "Token "),
    input,
    " ",
    el("button", { type: "submit", id: "signin-button" }, "Sign in"),
    msg,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    msg.textContent = "";
    try {
      state.session = await api("POST", "/console/session", { token: input.value });
      signedIn();
    } catch (e) {
      msg.textContent = "Sign-in failed: " + e.message;
    }
  });
  show(form);
  input.focus();
}

function signedIn() {
  document.getElementById("who").textContent = state.session.user + " (" + state.session.role + ")";
  document.getElementById("signout").hidden = false;
  route();
}

async function signOut() {
  try {
    await api("POST", "/console/signout");
  } catch (e) {
    // The cookie is gone or was never there: signed out either way.
  }
  state.session = null;
  location.hash = "#/jobs";
  signInPage("Signed out.");
}

// ---------- routing ----------

function route() {
  if (!state.session) return;
  const [where, search] = (location.hash || "#/jobs").slice(2).split("?");
  const parts = where.split("/");
  const query = new URLSearchParams(search || "");
  document.querySelectorAll("#nav a").forEach((a) =>
    a.classList.toggle("active", a.dataset.page === parts[0]));
  const p = newPage();
  if (parts[0] === "jobs" && parts[1]) return jobPage(p, decodeURIComponent(parts[1]));
  if (parts[0] === "studies" && parts[1]) return studyPage(p, decodeURIComponent(parts[1]));
  if (parts[0] === "studies") return studiesPage(p);
  if (parts[0] === "compare") return comparePage(p, query);
  if (parts[0] === "queue") return queuePage(p);
  if (parts[0] === "nodes") return nodesPage(p);
  if (parts[0] === "usage") return usagePage(p);
  return jobsPage(p);
}


// ---------- start ----------

state.onSessionEnded = signInPage;
document.querySelector("a.skip").addEventListener("click", (ev) => {
  ev.preventDefault(); // the hash is the page's route
  document.getElementById("main").focus();
});
window.addEventListener("hashchange", route);
document.getElementById("signout").addEventListener("click", signOut);
(async () => {
  try {
    state.session = await api("GET", "/console/session");
    signedIn();
  } catch (e) {
    signInPage(e.status === 401 ? "" : e.message);
  }
})();

