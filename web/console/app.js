// The Stoker web console (docs/console.md): a page of plain modern
// JavaScript, no build step. It reads and acts through stokerd's own REST
// API with the session cookie set at sign-in; requests that change anything
// carry the X-Stoker-CSRF value the sign-in answered. Charts are small SVGs
// drawn here. Pages live in the URL's hash: #/jobs, #/jobs/ID,
// #/studies, #/studies/ID, #/queue, #/nodes.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const LOG_POLL_MS = 300;
const REFRESH_MS = 5000;
const PAGE_SIZE = 50;
// The list routes ignore the project and location for listing; ids are global.
const BASE = "/v1/projects/local/locations/local";
const TERMINAL = new Set(["JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"]);

let session = null; // {user, role, csrf}
let page = null; // the current page: {stop()} ends its timers

// ---------- DOM helpers ----------

// el("div", {class: "x", onclick: f}, child, "text", ...)
function el(tag, attrs, ...children) {
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

function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function main() {
  return document.getElementById("main");
}

function show(...nodes) {
  main().replaceChildren(...nodes);
}

function shortState(s) {
  return (s || "").replace(/^JOB_STATE_/, "");
}

function stateBadge(s) {
  return el("span", { class: "state s-" + shortState(s).toLowerCase() }, shortState(s) || "?");
}

function fmtTime(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString();
}

function fmtDuration(seconds) {
  if (!(seconds >= 0)) return "";
  if (seconds < 60) return seconds.toFixed(0) + " s";
  if (seconds < 3600) return Math.floor(seconds / 60) + " min " + Math.floor(seconds % 60) + " s";
  return Math.floor(seconds / 3600) + " h " + Math.floor((seconds % 3600) / 60) + " min";
}

function fmtBytes(n) {
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

function fmtNum(v) {
  if (typeof v !== "number" || !isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(2);
  return Number(v.toPrecision(4)).toString();
}

function jobId(name) {
  return (name || "").split("/").pop();
}

// ---------- the API ----------

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// Calls the API with the session cookie; JSON in, JSON out. A 401 sends
// the user to sign-in; other errors throw ApiError with the server's message.
async function api(method, path, body) {
  const headers = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && session) headers["X-Stoker-CSRF"] = session.csrf;
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
      session = null;
      signInPage("Your session ended: " + message);
    }
    throw new ApiError(r.status, message);
  }
  return data;
}

function errorBox(e) {
  return el("p", { class: "error" }, e instanceof Error ? e.message : String(e));
}

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
      session = await api("POST", "/console/session", { token: input.value });
      signedIn();
    } catch (e) {
      msg.textContent = "Sign-in failed: " + e.message;
    }
  });
  show(form);
  input.focus();
}

function signedIn() {
  document.getElementById("who").textContent = session.user + " (" + session.role + ")";
  document.getElementById("signout").hidden = false;
  route();
}

async function signOut() {
  try {
    await api("POST", "/console/signout");
  } catch (e) {
    // The cookie is gone or was never there: signed out either way.
  }
  session = null;
  location.hash = "#/jobs";
  signInPage("Signed out.");
}

// ---------- routing ----------

function stopPage() {
  if (page) page.stop();
  page = null;
}

// A page's timers: every(fn, ms) runs fn now and then every ms until stop().
function newPage() {
  stopPage();
  const timers = [];
  const p = {
    live: true,
    stop() {
      p.live = false;
      timers.forEach(clearTimeout);
    },
    // Runs fn, then again ms after it settles; fn returns false to end.
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

function route() {
  if (!session) return;
  const parts = (location.hash || "#/jobs").slice(2).split("/");
  document.querySelectorAll("#nav a").forEach((a) =>
    a.classList.toggle("active", a.dataset.page === parts[0]));
  const p = newPage();
  if (parts[0] === "jobs" && parts[1]) return jobPage(p, decodeURIComponent(parts[1]));
  if (parts[0] === "studies" && parts[1]) return studyPage(p, decodeURIComponent(parts[1]));
  if (parts[0] === "studies") return studiesPage(p);
  if (parts[0] === "queue") return queuePage(p);
  if (parts[0] === "nodes") return nodesPage(p);
  return jobsPage(p);
}

// ---------- jobs list ----------

const STATES = ["QUEUED", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLING", "CANCELLED"];
const listState = { text: "", state: "", owner: "", tokens: [""] };

function quote(s) {
  return '"' + s.replace(/\\/g, "\\\\").replace(/"/g, '\\"') + '"';
}

function jobsFilter() {
  const parts = [];
  if (listState.text.trim()) {
    const t = listState.text.trim();
    // A bare word searches names; anything with an operator is an AIP-160 filter.
    parts.push(/[=<>:]/.test(t) ? "(" + t + ")" : "display_name:" + quote("*" + t + "*"));
  }
  if (listState.state) parts.push("state=JOB_STATE_" + listState.state);
  if (listState.owner.trim()) parts.push("user=" + quote(listState.owner.trim()));
  return parts.join(" AND ");
}

function jobsPage(p) {
  const text = el("input", {
    id: "filter-text", type: "search", size: 36, value: listState.text,
    placeholder: "name, or a filter: labels.team=vision",
  });
  const state = el("select", { id: "filter-state" },
    el("option", { value: "" }, "any state"),
    STATES.map((s) => el("option", { value: s, selected: listState.state === s }, s)));
  const owner = el("input", {
    id: "filter-owner", type: "search", size: 12, value: listState.owner, placeholder: "owner",
  });
  const status = el("span", { class: "muted", id: "jobs-status" });
  const tbody = el("tbody", { id: "jobs-body" });
  const prev = el("button", { type: "button", id: "prev" }, "← Newer");
  const next = el("button", { type: "button", id: "next" }, "Older →");
  const apply = () => {
    listState.text = text.value;
    listState.state = state.value;
    listState.owner = owner.value;
    listState.tokens = [""];
    load();
  };
  text.addEventListener("change", apply);
  owner.addEventListener("change", apply);
  state.addEventListener("change", apply);
  prev.addEventListener("click", () => {
    if (listState.tokens.length > 1) listState.tokens.pop();
    load();
  });
  let nextToken = null;
  next.addEventListener("click", () => {
    if (nextToken) listState.tokens.push(nextToken);
    load();
  });

  async function load() {
    const q = new URLSearchParams({ pageSize: PAGE_SIZE, orderBy: "create_time desc" });
    const f = jobsFilter();
    if (f) q.set("filter", f);
    const token = listState.tokens[listState.tokens.length - 1];
    if (token) q.set("pageToken", token);
    const t0 = performance.now();
    let data;
    try {
      data = await api("GET", BASE + "/customJobs?" + q);
    } catch (e) {
      status.replaceChildren(errorBox(e));
      return;
    }
    if (!p.live) return;
    nextToken = data.nextPageToken || null;
    const now = Date.now();
    const rows = (data.customJobs || []).map((j) => {
      const id = jobId(j.name);
      const start = j.startTime ? Date.parse(j.startTime) : null;
      const end = j.endTime ? Date.parse(j.endTime) : now;
      return el("tr", { "data-job": id },
        el("td", {}, el("a", { href: "#/jobs/" + id }, id)),
        el("td", {}, el("a", { href: "#/jobs/" + id }, j.displayName || "")),
        el("td", {}, stateBadge(j.state)),
        el("td", {}, (j.stoker && j.stoker.user) || ""),
        el("td", {}, fmtTime(j.createTime)),
        el("td", {}, start ? fmtDuration((end - start) / 1000) : ""));
    });
    tbody.replaceChildren(...rows);
    if (!rows.length) tbody.append(el("tr", {}, el("td", { colspan: 6, class: "muted" }, "No jobs match.")));
    prev.disabled = listState.tokens.length <= 1;
    next.disabled = !nextToken;
    status.textContent = "page " + listState.tokens.length + " · " + rows.length + " jobs · " +
      Math.round(performance.now() - t0) + " ms";
    // For bench/console_bench.py: the first list painted after this navigation.
    if (!performance.getEntriesByName("stoker-jobs-painted").length) {
      requestAnimationFrame(() => setTimeout(() => performance.mark("stoker-jobs-painted"), 0));
    }
  }

  show(
    el("h1", {}, "Jobs"),
    el("div", { class: "toolbar" }, text, state, owner,
      el("button", { type: "button", onclick: apply }, "Filter"), status),
    el("table", { class: "list", id: "jobs" },
      el("thead", {}, el("tr", {}, ["ID", "Name", "State", "Owner", "Created", "Ran"].map((h) => el("th", {}, h)))),
      tbody),
    el("div", { class: "pager" }, prev, next),
  );
  p.every(load, REFRESH_MS);
}

// ---------- charts ----------

function niceTicks(lo, hi, n) {
  if (!(hi > lo)) {
    lo -= 1;
    hi += 1;
  }
  const raw = (hi - lo) / n;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
  const ticks = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) ticks.push(Number(v.toPrecision(12)));
  return { lo, hi, ticks };
}

// An SVG chart of one or more series of [x, y] points. opts: {title, xTime
// (x in unix seconds), xLabel, yLabel, scatter (no lines), highlight ([x, y])}.
// The svg carries data-points: the number of points drawn.
function chart(series, opts) {
  const W = 460, H = 220, L = 56, R = 12, T = 26, B = 34;
  const all = series.flatMap((s) => s.points).filter((pt) => isFinite(pt[0]) && isFinite(pt[1]));
  const root = svg("svg", {
    class: "chart", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img",
    "aria-label": opts.title || "chart", "data-points": all.length,
  });
  root.append(svg("text", { x: L, y: 16, class: "chart-title" }, opts.title || ""));
  if (!all.length) {
    root.append(svg("text", { x: W / 2, y: H / 2, class: "nodata", "text-anchor": "middle" }, "no data"));
    return root;
  }
  const xs = niceTicks(Math.min(...all.map((p) => p[0])), Math.max(...all.map((p) => p[0])), 5);
  const ys = niceTicks(Math.min(...all.map((p) => p[1])), Math.max(...all.map((p) => p[1])), 4);
  const X = (v) => L + ((v - xs.lo) / (xs.hi - xs.lo)) * (W - L - R);
  const Y = (v) => H - B - ((v - ys.lo) / (ys.hi - ys.lo)) * (H - T - B);
  const axes = svg("g", { class: "axes" });
  axes.append(svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B }));
  axes.append(svg("line", { x1: L, y1: T, x2: L, y2: H - B }));
  for (const v of ys.ticks) {
    axes.append(svg("line", { class: "grid", x1: L, y1: Y(v), x2: W - R, y2: Y(v) }));
    axes.append(svg("text", { x: L - 4, y: Y(v) + 4, "text-anchor": "end" }, fmtNum(v)));
  }
  const xt = opts.xTime ? xs.ticks.filter((_, i) => i % 2 === 0) : xs.ticks;
  for (const v of xt) {
    const label = opts.xTime ? new Date(v * 1000).toLocaleTimeString() : fmtNum(v);
    axes.append(svg("text", { x: X(v), y: H - B + 14, "text-anchor": "middle" }, label));
  }
  if (opts.xLabel) axes.append(svg("text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle", class: "axis-label" }, opts.xLabel));
  root.append(axes);
  const legend = svg("g", { class: "legend" });
  series.forEach((s, i) => {
    const pts = s.points.filter((pt) => isFinite(pt[0]) && isFinite(pt[1]));
    const cls = "c" + (i % 6);
    const g = svg("g", { class: "series " + cls, "data-series": s.name });
    if (!opts.scatter && pts.length > 1) {
      g.append(svg("polyline", { points: pts.map((p) => X(p[0]) + "," + Y(p[1])).join(" ") }));
    }
    if (opts.scatter || pts.length <= 300) {
      for (const p of pts) {
        const c = svg("circle", { class: "pt", cx: X(p[0]), cy: Y(p[1]), r: opts.scatter ? 3.5 : 2.2 });
        c.append(svg("title", {}, (p[2] ? p[2] + ": " : "") + fmtNum(p[0]) + ", " + fmtNum(p[1])));
        g.append(c);
      }
    }
    root.append(g);
    if (series.length > 1) {
      legend.append(svg("text", { x: W - R, y: 12 + i * 11, class: cls, "text-anchor": "end" }, s.name));
    }
  });
  if (opts.highlight) {
    root.append(svg("circle", { class: "best", cx: X(opts.highlight[0]), cy: Y(opts.highlight[1]), r: 6 }));
  }
  root.append(legend);
  return root;
}

function chartBox(id, title) {
  return el("div", { class: "charts", id }, el("h2", {}, title), el("p", { class: "muted" }, "loading…"));
}

// ---------- one job ----------

function jobPage(p, id) {
  const path = BASE + "/customJobs/" + encodeURIComponent(id);
  const head = el("div", { id: "job-head" }, el("h1", {}, "Job " + id));
  const why = el("div", { id: "why" });
  const events = el("div", { id: "events" });
  const logBox = el("pre", { id: "log", class: "log", tabindex: 0 });
  const replicaSel = el("select", { id: "replica" });
  const follow = el("input", { type: "checkbox", id: "follow", checked: true });
  const metrics = chartBox("metrics", "Training metrics");
  const telemetry = chartBox("telemetry", "CPU and GPU telemetry");
  const outputs = el("div", { id: "outputs" }, el("h2", {}, "Outputs"));
  const specBox = el("details", { id: "spec" }, el("summary", {}, "Spec"), el("pre", {}));
  show(head, why,
    el("section", {}, el("h2", {}, "Log ", replicaSel, " ",
      el("label", { class: "small" }, follow, " follow")), logBox),
    el("section", { class: "chart-row" }, metrics, telemetry),
    events, outputs, specBox);

  let job = null;
  const log = { replica: null, offset: 0, ended: false };
  replicaSel.addEventListener("change", () => {
    log.replica = replicaSel.value;
    log.offset = 0;
    log.ended = false;
    logBox.textContent = "";
  });

  function renderHead() {
    const canCancel = session.role === "admin" ||
      (session.role === "user" && job.stoker && job.stoker.user === session.user);
    const button = el("button", {
      type: "button", id: "cancel", class: "danger",
      disabled: !canCancel || TERMINAL.has(job.state) || job.state === "JOB_STATE_CANCELLING",
      title: canCancel ? "Cancel this job" : "Your role (" + session.role + ") may not cancel this job",
    }, "Cancel");
    button.addEventListener("click", async () => {
      if (!confirm("Cancel job " + id + "?")) return;
      button.disabled = true;
      try {
        await api("POST", path + ":cancel");
        await loadJob();
      } catch (e) {
        head.append(errorBox(e));
      }
    });
    const rows = [
      ["Name", job.displayName],
      ["State", stateBadge(job.state)],
      ["Owner", job.stoker && job.stoker.user],
      ["Attempt", job.stoker && job.stoker.attempt],
      ["Created", fmtTime(job.createTime)],
      ["Started", fmtTime(job.startTime)],
      ["Ended", fmtTime(job.endTime)],
    ];
    if (job.error) rows.push(["Error", job.error.message]);
    head.replaceChildren(
      el("h1", {}, "Job " + id + " ", stateBadge(job.state), " ", button),
      el("table", { class: "kv" }, rows.filter((r) => r[1]).map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v)))));
    head.dataset.state = job.state;
  }

  async function loadJob() {
    try {
      job = await api("GET", path);
    } catch (e) {
      if (e.status === 404) {
        stopPage();
        show(el("h1", {}, "Job " + id), el("p", { class: "error", id: "not-found" }, "Job " + id + " not found: " + e.message));
        return false;
      }
      throw e;
    }
    renderHead();
    specBox.lastChild.textContent = JSON.stringify(job.jobSpec || job, null, 2);
    await loadEvents();
    return !TERMINAL.has(job.state) || !log.ended;
  }

  async function loadEvents() {
    const ev = await api("GET", path + "/events");
    const waiting = job.state === "JOB_STATE_QUEUED" || job.state === "JOB_STATE_PENDING";
    why.replaceChildren();
    if (waiting) {
      let entry = null;
      try {
        const q = await api("GET", "/v1/stoker/queue");
        entry = (q.jobs || []).find((j) => j.jobId === id);
      } catch (e) { /* the queue view is optional here */ }
      why.append(el("div", { class: "card why" },
        el("h2", {}, "Why it waits"),
        el("p", {}, (entry && entry.reason) || ev.waitReason || "waiting for the scheduler"),
        entry ? el("p", { class: "muted" }, "Position " + entry.position + " in the queue" +
          (entry.estimatedStartTime ? " · estimated start " + fmtTime(entry.estimatedStartTime) : "")) : null));
    }
    const replicas = ev.replicas || [];
    if (replicas.length && replicaSel.options.length !== replicas.length) {
      replicaSel.replaceChildren(...replicas.map((r) => el("option", { value: r }, r)));
      if (!log.replica) log.replica = replicas[0];
      replicaSel.value = log.replica;
    }
    events.replaceChildren(el("h2", {}, "Events"),
      el("table", { class: "list" },
        el("thead", {}, el("tr", {}, ["Time", "From", "To", "Reason"].map((h) => el("th", {}, h)))),
        el("tbody", {}, (ev.events || []).map((e) => el("tr", {},
          el("td", {}, fmtTime(e.time)), el("td", {}, shortState(e.from)), el("td", {}, shortState(e.to)), el("td", {}, e.reason))))));
  }

  // The log tail: one request per tick from the last offset; a quick
  // re-poll while data keeps coming, stop once the job ended and it is dry.
  async function pollLog() {
    if (!log.replica) return true;
    const q = new URLSearchParams({ replica: log.replica, offset: log.offset });
    let r;
    try {
      r = await api("GET", path + "/logs?" + q);
    } catch (e) {
      if (e.status === 404) return true; // the replica has not started yet
      throw e;
    }
    if (r.data) {
      const atBottom = logBox.scrollTop + logBox.clientHeight >= logBox.scrollHeight - 4;
      logBox.append(document.createTextNode(r.data));
      if (follow.checked && atBottom) logBox.scrollTop = logBox.scrollHeight;
      logBox.dataset.bytes = String(r.nextOffset);
    }
    log.offset = r.nextOffset;
    if (!r.data && TERMINAL.has(r.state)) log.ended = true;
    return !log.ended;
  }

  async function loadMetrics() {
    const box = metrics;
    let data;
    try {
      data = await api("GET", path + "/trainingMetrics");
    } catch (e) {
      if (e.status !== 404 && e.status !== 401) box.replaceChildren(box.firstChild, errorBox(e));
      else if (e.status === 404) box.replaceChildren(box.firstChild, el("p", { class: "muted nodata" }, "no data (this stokerd serves no training metrics)"));
      return job && !TERMINAL.has(job.state);
    }
    const series = data.series || [];
    const charts = series.map((s) => chart(
      [{ name: s.name, points: (s.points || []).map((pt) => [pt.step !== undefined && pt.step !== null ? pt.step : pt.t, pt.value]) }],
      { title: s.name + " (" + s.source + ")", xLabel: "step" }));
    const skipped = (data.skipped || []).map((s) => el("li", {}, s.file + ": " + s.reason));
    box.replaceChildren(box.firstChild,
      ...(charts.length ? charts : [el("p", { class: "muted nodata" }, "no data yet")]),
      skipped.length ? el("ul", { class: "muted small" }, skipped) : "");
    return job && !TERMINAL.has(job.state);
  }

  async function loadTelemetry() {
    const box = telemetry;
    let data;
    try {
      data = await api("GET", path + "/telemetry");
    } catch (e) {
      if (e.status === 404) box.replaceChildren(box.firstChild, el("p", { class: "muted nodata" }, "no data (this stokerd serves no telemetry)"));
      else if (e.status !== 401) box.replaceChildren(box.firstChild, errorBox(e));
      return job && !TERMINAL.has(job.state);
    }
    const reps = data.replicas || [];
    const cpu = [], rss = [], gpuUtil = [], gpuMem = [];
    for (const r of reps) {
      const label = r.replica + (reps.some((o) => o.replica === r.replica && o !== r) ? " #" + r.attempt : "");
      const pts = r.points || [];
      cpu.push({ name: label, points: pts.filter((p) => p.cpuPercent !== undefined).map((p) => [p.t, p.cpuPercent]) });
      rss.push({ name: label, points: pts.filter((p) => p.rssBytes !== undefined).map((p) => [p.t, p.rssBytes / 1048576]) });
      const gpus = new Map();
      for (const p of pts) {
        for (const g of p.gpus || []) {
          if (!gpus.has(g.index)) gpus.set(g.index, { util: [], mem: [] });
          if (g.utilPercent !== undefined) gpus.get(g.index).util.push([p.t, g.utilPercent]);
          if (g.memoryBytes !== undefined) gpus.get(g.index).mem.push([p.t, g.memoryBytes / 1048576]);
        }
      }
      for (const [i, g] of gpus) {
        gpuUtil.push({ name: label + " GPU " + i, points: g.util });
        gpuMem.push({ name: label + " GPU " + i, points: g.mem });
      }
    }
    const charts = [
      chart(cpu, { title: "CPU %", xTime: true }),
      chart(rss, { title: "Memory (RSS, MiB)", xTime: true }),
    ];
    if (gpuUtil.length) {
      charts.push(chart(gpuUtil, { title: "GPU utilisation %", xTime: true }));
      charts.push(chart(gpuMem, { title: "GPU memory (MiB)", xTime: true }));
    }
    box.replaceChildren(box.firstChild, ...(reps.length ? charts : [el("p", { class: "muted nodata" }, "no data yet")]));
    return job && !TERMINAL.has(job.state);
  }

  async function loadOutputs() {
    if (!job) return true;
    let prefix = (job.jobSpec && job.jobSpec.baseOutputDirectory && job.jobSpec.baseOutputDirectory.outputUriPrefix) ||
      "gs://stoker-outputs/" + id + "/";
    const m = /^gs:\/\/([^/]+)\/?(.*)$/.exec(prefix);
    if (!m) {
      outputs.replaceChildren(el("h2", {}, "Outputs"), el("p", { class: "muted" }, prefix));
      return false;
    }
    const [bucket, objPrefix] = [m[1], m[2] && !m[2].endsWith("/") ? m[2] + "/" : m[2]];
    let items = [];
    try {
      items = (await api("GET", "/storage/v1/b/" + encodeURIComponent(bucket) + "/o?prefix=" + encodeURIComponent(objPrefix))).items || [];
    } catch (e) {
      outputs.replaceChildren(el("h2", {}, "Outputs"), el("p", { class: "muted" }, "gs://" + bucket + "/" + objPrefix + ": " + e.message));
      return !TERMINAL.has(job.state);
    }
    outputs.replaceChildren(el("h2", {}, "Outputs ", el("code", { class: "small" }, "gs://" + bucket + "/" + objPrefix)),
      items.length ? el("table", { class: "list" },
        el("thead", {}, el("tr", {}, ["Object", "Size", "Updated"].map((h) => el("th", {}, h)))),
        el("tbody", {}, items.slice(0, 500).map((o) => el("tr", {},
          el("td", {}, el("a", { href: "/storage/v1/b/" + encodeURIComponent(bucket) + "/o/" + encodeURIComponent(o.name) + "?alt=media", download: o.name.split("/").pop() }, o.name.slice(objPrefix.length))),
          el("td", {}, fmtBytes(o.size)), el("td", {}, fmtTime(o.updated))))))
        : el("p", { class: "muted" }, "nothing yet"));
    return !TERMINAL.has(job.state);
  }

  (async () => {
    let ok;
    try {
      ok = await loadJob();
    } catch (e) {
      head.append(errorBox(e));
      return;
    }
    if (ok === false && !job) return;
    p.every(loadJob, 2000);
    p.every(pollLog, LOG_POLL_MS);
    p.every(loadMetrics, REFRESH_MS);
    p.every(loadTelemetry, REFRESH_MS);
    p.every(loadOutputs, REFRESH_MS);
  })();
}

// ---------- studies ----------

function studyMetric(study) {
  const m = (study.studySpec && study.studySpec.metrics && study.studySpec.metrics[0]) || {};
  return { id: m.metricId || "", maximize: m.goal !== "MINIMIZE" };
}

function trialValue(t, metricId) {
  const fm = t.finalMeasurement;
  const m = fm && (fm.metrics || []).find((x) => x.metricId === metricId);
  if (m) return Number(m.value);
  const last = (t.measurements || []).slice(-1)[0];
  const lm = last && (last.metrics || []).find((x) => x.metricId === metricId);
  return lm ? Number(lm.value) : NaN;
}

function paramValue(t, pid) {
  const p = (t.parameters || []).find((x) => x.parameterId === pid);
  return p ? p.value : undefined;
}

function bestTrial(study) {
  const { id, maximize } = studyMetric(study);
  let best = null;
  for (const t of study.trials || []) {
    const v = trialValue(t, id);
    if (!isFinite(v)) continue;
    if (!best || (maximize ? v > best.v : v < best.v)) best = { t, v };
  }
  return best;
}

function studiesPage(p) {
  const tbody = el("tbody", { id: "studies-body" });
  show(el("h1", {}, "Studies"),
    el("table", { class: "list", id: "studies" },
      el("thead", {}, el("tr", {}, ["ID", "Name", "State", "Trials", "Metric", "Best"].map((h) => el("th", {}, h)))),
      tbody));
  p.every(async () => {
    const data = await api("GET", BASE + "/hyperparameterTuningJobs?pageSize=100&orderBy=" + encodeURIComponent("create_time desc"));
    const rows = (data.hyperparameterTuningJobs || []).map((s) => {
      const id = jobId(s.name);
      const m = studyMetric(s);
      const best = bestTrial(s);
      return el("tr", {},
        el("td", {}, el("a", { href: "#/studies/" + id }, id)),
        el("td", {}, el("a", { href: "#/studies/" + id }, s.displayName || "")),
        el("td", {}, stateBadge(s.state)),
        el("td", {}, (s.trials || []).length + " / " + (s.maxTrialCount || "?")),
        el("td", {}, m.id + (m.maximize ? " ↑" : " ↓")),
        el("td", {}, best ? fmtNum(best.v) + " (trial " + best.t.id + ")" : ""));
    });
    tbody.replaceChildren(...rows);
    if (!rows.length) tbody.append(el("tr", {}, el("td", { colspan: 6, class: "muted" }, "No studies.")));
  }, REFRESH_MS);
}

function studyPage(p, id) {
  const path = BASE + "/hyperparameterTuningJobs/" + encodeURIComponent(id);
  const sort = { key: "metric", desc: true, initial: true };
  let study = null;
  const head = el("div", {});
  const table = el("table", { class: "list", id: "trials" });
  const charts = el("section", { class: "chart-row", id: "study-charts" });
  show(head, charts, el("h2", {}, "Trials"), table);

  function render() {
    const { id: metricId, maximize } = studyMetric(study);
    if (sort.initial) sort.desc = maximize;
    const params = [...new Set((study.trials || []).flatMap((t) => (t.parameters || []).map((x) => x.parameterId)))];
    const best = bestTrial(study);
    head.replaceChildren(
      el("h1", {}, "Study " + id + " ", stateBadge(study.state)),
      el("table", { class: "kv" },
        el("tr", {}, el("th", {}, "Name"), el("td", {}, study.displayName || "")),
        el("tr", {}, el("th", {}, "Metric"), el("td", {}, metricId + " (" + (maximize ? "maximize" : "minimize") + ")")),
        el("tr", {}, el("th", {}, "Trials"), el("td", {}, (study.trials || []).length + " of " + (study.maxTrialCount || "?"))),
        el("tr", {}, el("th", {}, "Best"), el("td", { id: "best" }, best ? "trial " + best.t.id + ": " + fmtNum(best.v) : "none yet"))));
    const value = (t, key) => key === "metric" ? trialValue(t, metricId) : key === "id" ? Number(t.id) :
      key === "state" ? t.state : paramValue(t, key);
    const trials = [...(study.trials || [])].sort((a, b) => {
      let x = value(a, sort.key), y = value(b, sort.key);
      const nx = typeof x === "number" ? isNaN(x) : x === undefined;
      const ny = typeof y === "number" ? isNaN(y) : y === undefined;
      if (nx !== ny) return nx ? 1 : -1; // trials without a value last
      const c = x < y ? -1 : x > y ? 1 : 0;
      return sort.desc ? -c : c;
    });
    const header = (key, label) => el("th", {
      class: "sortable" + (sort.key === key ? " sorted" : ""), "data-key": key,
      onclick: () => {
        sort.desc = sort.key === key ? !sort.desc : key === "metric" ? maximize : false;
        sort.key = key;
        sort.initial = false;
        render();
      },
    }, label + (sort.key === key ? (sort.desc ? " ▼" : " ▲") : ""));
    table.replaceChildren(
      el("thead", {}, el("tr", {}, header("id", "Trial"), header("state", "State"), header("metric", metricId),
        params.map((k) => header(k, k)), el("th", {}, "Job"))),
      el("tbody", {}, trials.map((t) => el("tr", { class: best && best.t === t ? "best-row" : "", "data-trial": t.id },
        el("td", {}, t.id), el("td", {}, t.state + (t.stoppedEarly ? " (stopped early)" : "")),
        el("td", { class: "num" }, fmtNum(trialValue(t, metricId))),
        params.map((k) => el("td", { class: "num" }, paramValue(t, k) === undefined ? "" : fmtNum(paramValue(t, k)))),
        el("td", {}, el("a", { href: "#/jobs/" + jobId(t.customJob) }, jobId(t.customJob)))))));
    // The metric over trials, with the best so far.
    const pts = (study.trials || []).map((t) => [Number(t.id), trialValue(t, metricId)]).filter((q) => isFinite(q[1]));
    pts.sort((a, b) => a[0] - b[0]);
    let run = null;
    const bestSoFar = pts.map((q) => {
      run = run === null ? q[1] : maximize ? Math.max(run, q[1]) : Math.min(run, q[1]);
      return [q[0], run];
    });
    const chartsOut = [chart([{ name: metricId, points: pts }, { name: "best so far", points: bestSoFar }],
      { title: metricId + " by trial", xLabel: "trial", highlight: best ? [Number(best.t.id), best.v] : null })];
    // Each parameter against the metric (categorical values by their order).
    for (const k of params) {
      const cats = [];
      const sp = (study.trials || []).map((t) => {
        let x = paramValue(t, k);
        if (typeof x !== "number") {
          if (!cats.includes(String(x))) cats.push(String(x));
          x = cats.indexOf(String(x));
        }
        return [x, trialValue(t, metricId), "trial " + t.id];
      }).filter((q) => isFinite(q[0]) && isFinite(q[1]));
      chartsOut.push(chart([{ name: k, points: sp }], {
        title: metricId + " against " + k + (cats.length ? " (" + cats.join(", ") + ")" : ""), xLabel: k, scatter: true,
      }));
    }
    charts.replaceChildren(...chartsOut);
  }

  p.every(async () => {
    try {
      study = await api("GET", path);
    } catch (e) {
      if (e.status === 404) {
        show(el("h1", {}, "Study " + id), el("p", { class: "error", id: "not-found" }, "Study " + id + " not found: " + e.message));
        return false;
      }
      throw e;
    }
    render();
    return !TERMINAL.has(study.state);
  }, REFRESH_MS);
}

// ---------- queue and nodes ----------

function queuePage(p) {
  const tbody = el("tbody", { id: "queue-body" });
  show(el("h1", {}, "Queue"),
    el("p", { class: "muted" }, "In the order the scheduler takes it, with each job's reason to wait."),
    el("table", { class: "list", id: "queue" },
      el("thead", {}, el("tr", {}, ["#", "Job", "Name", "User", "Priority", "GPUs", "Reason", "Estimated start"].map((h) => el("th", {}, h)))),
      tbody));
  p.every(async () => {
    const q = await api("GET", "/v1/stoker/queue");
    const rows = (q.jobs || []).map((j) => el("tr", {},
      el("td", {}, j.position), el("td", {}, el("a", { href: "#/jobs/" + j.jobId }, j.jobId)),
      el("td", {}, j.displayName || ""), el("td", {}, j.user),
      el("td", {}, j.priority + (j.effectivePriority !== j.priority ? " → " + j.effectivePriority : "")),
      el("td", {}, j.gpus), el("td", {}, j.reason), el("td", {}, fmtTime(j.estimatedStartTime) || "unknown")));
    tbody.replaceChildren(...rows);
    if (!rows.length) tbody.append(el("tr", {}, el("td", { colspan: 8, class: "muted" }, "Nothing waits.")));
  }, REFRESH_MS);
}

function nodesPage(p) {
  const box = el("div", { id: "nodes" });
  show(el("h1", {}, "Nodes"), box);
  p.every(async () => {
    const data = await api("GET", "/v1/stoker/nodes");
    box.replaceChildren(...(data.nodes || []).map((n) => el("section", { class: "card" },
      el("h2", {}, n.name),
      el("p", {}, "CPUs booked " + fmtNum(n.cpus_booked) + " of " + n.cpus +
        (n.cpu_oversubscription > 1 ? " (×" + n.cpu_oversubscription + " oversubscription)" : "") +
        " · memory booked " + fmtBytes(n.memory_booked_bytes) + " of " + fmtBytes(n.memory_bytes)),
      (n.gpus || []).length ? el("table", { class: "list" },
        el("thead", {}, el("tr", {}, ["GPU", "Type", "Memory", "Utilisation", "In use", "Used by"].map((h) => el("th", {}, h)))),
        el("tbody", {}, n.gpus.map((g) => el("tr", {},
          el("td", {}, g.index), el("td", {}, g.type), el("td", {}, fmtBytes(g.memory_bytes)),
          el("td", {}, g.utilization_percent !== undefined ? g.utilization_percent + " %" : ""),
          el("td", {}, g.memory_used_bytes !== undefined ? fmtBytes(g.memory_used_bytes) : ""),
          el("td", {}, (g.holders || []).length ? (g.holders || []).map((h) => el("div", {},
            el("a", { href: "#/jobs/" + h.job }, "job " + h.job), " " + h.replica + " · " + h.user +
            (h.fraction && h.fraction < 1 ? " · " + h.fraction + " GPU" : ""))) : "free")))))
        : el("p", { class: "muted" }, "No GPUs."))));
    if (!(data.nodes || []).length) box.append(el("p", { class: "muted" }, "No nodes."));
  }, REFRESH_MS);
}

// ---------- start ----------

window.addEventListener("hashchange", route);
document.getElementById("signout").addEventListener("click", signOut);
(async () => {
  try {
    session = await api("GET", "/console/session");
    signedIn();
  } catch (e) {
    signInPage(e.status === 401 ? "" : e.message);
  }
})();
