// The jobs list (#/jobs), docs/console.md.
import {
  api, ApiError, BASE, el, errorBox, fmtBytes, fmtDuration, fmtNum, fmtTime, jobId, LOG_POLL_MS,
  PAGE_SIZE, REFRESH_MS, shortState, show, state, stateBadge, stopPage, TERMINAL,
} from "./util.js";

// ---------- jobs list ----------

const STATES = ["QUEUED", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLING", "CANCELLED"];
const listState = { text: "", state: "", owner: "", tokens: [""] };
const picked = new Set(); // job ids ticked for comparison

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

export function jobsPage(p) {
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
  const compare = el("button", { type: "button", id: "compare" });
  const updateCompare = () => {
    compare.textContent = "Compare " + picked.size + " selected";
    compare.disabled = picked.size < 2;
  };
  updateCompare();
  compare.addEventListener("click", () => {
    location.hash = "#/compare?jobs=" + [...picked].sort((a, b) => a - b).join(",");
  });
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
      const tick = el("input", { type: "checkbox", class: "pick", "aria-label": "compare job " + id, checked: picked.has(id) });
      tick.addEventListener("change", () => {
        if (tick.checked) picked.add(id);
        else picked.delete(id);
        updateCompare();
      });
      return el("tr", { "data-job": id },
        el("td", {}, tick),
        el("td", {}, el("a", { href: "#/jobs/" + id }, id)),
        el("td", {}, el("a", { href: "#/jobs/" + id }, j.displayName || "")),
        el("td", {}, stateBadge(j.state)),
        el("td", {}, (j.stoker && j.stoker.user) || ""),
        el("td", {}, fmtTime(j.createTime)),
        el("td", {}, start ? fmtDuration((end - start) / 1000) : ""));
    });
    tbody.replaceChildren(...rows);
    if (!rows.length) tbody.append(el("tr", {}, el("td", { colspan: 7, class: "muted" }, "No jobs match.")));
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
      el("button", { type: "button", onclick: apply }, "Filter"), compare, status),
    el("table", { class: "list", id: "jobs" },
      el("thead", {}, el("tr", {}, el("th", {}, el("span", { class: "sr" }, "Compare")), ["ID", "Name", "State", "Owner", "Created", "Ran"].map((h) => el("th", {}, h)))),
      tbody),
    el("div", { class: "pager" }, prev, next),
  );
  p.every(load, REFRESH_MS);
}
