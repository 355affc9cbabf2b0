// Shared helpers of the web console (docs/console.md): DOM building,
// formatting, the session and the API client. Every page module imports
// from here; nothing here knows a page.

export const SVG = "http://www.w3.org/2000/svg";
export const LOG_POLL_MS = 300;
export const REFRESH_MS = 5000;
export const PAGE_SIZE = 50;
// The list routes ignore the project and location for listing; ids are global.
export const BASE = "/v1/projects/local/locations/local";
export const TERMINAL = new Set(["JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"]);

// The signed-in user ({user, role, csrf}) and what to do when the server
// says the session ended (set by app.js).
export const state = { session: null, onSessionEnded: null };

// ---------- DOM helpers ----------

// el("div", {class: "x", onclick: f}, child, "text", ...)
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

export function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

export function main() {
  return document.getElementById("main");
}

export function show(...nodes) {
  main().replaceChildren(...nodes);
}

export function shortState(s) {
  return (s || "").replace(/^JOB_STATE_/, "");
}

export function stateBadge(s) {
  return el("span", { class: "state s-" + shortState(s).toLowerCase() }, shortState(s) || "?");
}

export function fmtTime(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString();
}

export function fmtDuration(seconds) {
  if (!(seconds >= 0)) return "";
  if (seconds < 60) return seconds.toFixed(0) + " s";
  if (seconds < 3600) return Math.floor(seconds / 60) + " min " + Math.floor(seconds % 60) + " s";
  return Math.floor(seconds / 3600) + " h " + Math.floor((seconds % 3600) / 60) + " min";
}

export function fmtBytes(n) {
  n = Number(n);
  if (!(n >= 0)) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return (i ? n.toFixed(1) : n) + " " + units[i];
}

export function fmtNum(v) {
  if (typeof v !== "number" || !isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(2);
  return Number(v.toPrecision(4)).toString();
}

export function jobId(name) {
  return (name || "").split("/").pop();
}

// ---------- the API ----------

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// Calls the API with the session cookie; JSON in, JSON out. A 401 ends the
// session (state.onSessionEnded); other errors throw ApiError with the
// server's message.
export async function api(method, path, body) {
  const headers = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && state.session) headers["X-Stoker-CSRF"] = state.session.csrf;
  const r = await fetch(path, {
    method,
    headers,
    credentials: "same-origin",
    cache: "no-store",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = {};
  try {
    data = await r.json();
  } catch (e) {
    data = {};
  }
  if (!r.ok) {
    const message = (data.error && data.error.message) || r.status + " " + r.statusText;
    if (r.status === 401 && !path.startsWith("/console/")) {
      state.session = null;
      if (state.onSessionEnded) state.onSessionEnded("Your session ended: " + message);
    }
    throw new ApiError(r.status, message);
  }
  return data;
}

export function errorBox(e) {
  return el("p", { class: "error" }, e instanceof Error ? e.message : String(e));
}

// ---------- the current page's timers ----------

let page = null; // the current page: {stop()} ends its timers

export function stopPage() {
  if (page) page.stop();
  page = null;
}

// A new page (ending the last one's timers): p.every(fn, ms) runs fn now
// and then again ms after it settles, until fn returns false or stop().
export function newPage() {
  stopPage();
  const timers = [];
  const p = {
    live: true,
    stop() {
      p.live = false;
      timers.forEach(clearTimeout);
    },
    every(fn, ms) {
      const tick = async () => {
        if (!p.live) return;
        let again = true;
        try {
          again = (await fn()) !== false;
        } catch (e) {
          again = !(e instanceof ApiError && e.status === 401);
        }
        if (p.live && again) timers.push(setTimeout(tick, ms));
      };
      tick();
    },
  };
  page = p;
  return p;
}
