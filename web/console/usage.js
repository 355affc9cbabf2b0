// Usage and cost (docs/cost.md): the usage page (#/usage: the ledger by
// user, project, month, GPU type or label, over a window, and every budget
// with this month's use), and the usage card of a job or a study page.
import { api, el, errorBox, fmtNum, show, svg, REFRESH_MS } from "./util.js";

const PRICES = [["vertex", "Vertex"], ["compute-engine", "Compute Engine"], ["spot", "Spot"], ["own", "own hardware"]];

export function fmtUsd(v) {
  if (v === null || v === undefined || !isFinite(v)) return "–";
  if (v !== 0 && Math.abs(v) < 1) return "$" + Number(v.toPrecision(3)); // a short job costs a fraction of a cent
  return "$" + (Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(2));
}

// The usage and cost of one job or study: its stoker.usage totals.
export function usageCard(usage, id) {
  if (!usage) return el("div", { id });
  const usd = usage.usd || {};
  const t = usage.telemetry;
  return el("section", { class: "card usage", id },
    el("h2", {}, "Usage and cost"),
    el("table", { class: "kv" },
      el("tr", {}, el("th", {}, "Replica-hours"), el("td", { "data-k": "replicaHours" }, fmtNum(usage.replicaHours || 0))),
      el("tr", {}, el("th", {}, "GPU-hours"), el("td", { "data-k": "gpuHours" }, fmtNum(usage.gpuHours || 0) +
        (t ? " (busy " + Math.round((100 * t.busyGpuHours) / Math.max(t.sampledGpuHours, 1e-12)) + "% of those sampled)" : ""))),
      el("tr", {}, el("th", {}, "vCPU-hours"), el("td", {}, fmtNum(usage.vcpuHours || 0))),
      PRICES.map(([k, label]) => el("tr", {}, el("th", {}, label),
        el("td", { "data-price": k }, fmtUsd(usd[k]))))));
}

// A horizontal bar of value/max, 120 px at most (an SVG: the page's CSP allows no inline style).
function bar(value, max, cls) {
  const w = max > 0 && value > 0 ? Math.max(1, Math.round((120 * value) / max)) : 0;
  return svg("svg", { class: "bar " + (cls || ""), width: 122, height: 12, "data-width": w },
    svg("rect", { x: 0, y: 1, width: 120, height: 10, class: "bar-back" }),
    svg("rect", { x: 0, y: 1, width: w, height: 10, class: "bar-fill" }));
}

export function usagePage(p) {
  const by = el("select", { id: "usage-by", "aria-label": "Group by" },
    ["user", "project", "month", "gpu", "job"].map((k) => el("option", { value: k }, k)));
  const days = el("select", { id: "usage-days", "aria-label": "Window" },
    [["", "this month"], ["7", "last 7 days"], ["30", "last 30 days"], ["90", "last 90 days"], ["365", "last year"]]
      .map(([v, label]) => el("option", { value: v }, label)));
  const price = el("select", { id: "usage-price", "aria-label": "Price" },
    PRICES.map(([k, label]) => el("option", { value: k }, label)));
  const table = el("table", { class: "list", id: "usage-table" });
  const budgets = el("table", { class: "list", id: "budgets" });
  const status = el("p", { class: "muted", id: "usage-status" });
  show(el("h1", {}, "Usage and cost"),
    el("div", { class: "toolbar" }, el("label", { for: "usage-by" }, "by "), by,
      el("label", { for: "usage-days" }, " over "), days, el("label", { for: "usage-price" }, " priced at "), price),
    status, table, el("h2", {}, "Budgets (this month)"), budgets);

  async function load() {
    const q = new URLSearchParams({ groupBy: by.value });
    if (days.value) q.set("days", days.value);
    let data;
    try {
      data = await api("GET", "/v1/usage?" + q);
    } catch (e) {
      status.replaceChildren(errorBox(e));
      return true;
    }
    if (!p.live) return false;
    status.textContent = new Date(data.startTime).toLocaleDateString() + " – " + new Date(data.endTime).toLocaleDateString() +
      (data.catalog ? " · prices: " + data.catalog.region + " list prices of " + data.catalog.priceDate : "");
    const groups = data.groups || [];
    const k = price.value;
    const max = Math.max(0, ...groups.map((g) => (g.usd && g.usd[k]) || 0));
    const row = (key, g, cls) => el("tr", { "data-key": key, class: cls || "" },
      el("td", {}, key), el("td", { class: "num" }, g.jobs === undefined ? "" : g.jobs),
      el("td", { class: "num" }, fmtNum(g.gpuHours || 0)), el("td", { class: "num" }, fmtNum(g.replicaHours || 0)),
      PRICES.map(([pk]) => el("td", { class: "num", "data-price": pk }, fmtUsd(g.usd && g.usd[pk]))),
      el("td", {}, cls ? "" : bar((g.usd && g.usd[k]) || 0, max)));
    table.replaceChildren(
      el("thead", {}, el("tr", {}, [by.value, "Jobs", "GPU-hours", "Replica-hours", ...PRICES.map((x) => x[1]), "Share"]
        .map((h) => el("th", {}, h)))),
      el("tbody", {}, groups.map((g) => row(g.key, g)),
        groups.length ? "" : el("tr", {}, el("td", { colspan: 9, class: "muted" }, "No usage in this window."))),
      el("tfoot", {}, row("total", data.total || {}, "total")));
    let b;
    try {
      b = await api("GET", "/v1/budgets");
    } catch (e) {
      budgets.replaceChildren(el("tr", {}, el("td", {}, e.message)));
      return true;
    }
    budgets.replaceChildren(
      el("thead", {}, el("tr", {}, ["Scope", "Month", "Limit", "Used", "", "Status"].map((h) => el("th", {}, h)))),
      el("tbody", {}, (b.budgets || []).map((s) => {
        const money = s.monthlyUsd !== null && s.monthlyUsd !== undefined;
        const limit = money ? s.monthlyUsd : s.monthlyGpuHours;
        const used = money ? s.usedUsd : s.usedGpuHours;
        const state = s.exceeded ? "EXCEEDED" : s.warning ? "WARNING" : "ok";
        return el("tr", { "data-scope": s.scope, class: "budget-" + state.toLowerCase() },
          el("td", {}, s.scope), el("td", {}, s.month),
          el("td", { class: "num" }, money ? fmtUsd(limit) + " (" + s.price + ")" : fmtNum(limit) + " GPU-h"),
          el("td", { class: "num" }, money ? fmtUsd(used) : fmtNum(used) + " GPU-h"),
          el("td", {}, bar(Math.min(used || 0, limit), limit, state === "ok" ? "" : "bar-" + state.toLowerCase())),
          el("td", { title: s.summary }, state));
      }), (b.budgets || []).length ? "" : el("tr", {}, el("td", { colspan: 6, class: "muted" }, "No budgets."))));
    return true;
  }
  for (const c of [by, days, price]) c.addEventListener("change", load);
  p.every(load, REFRESH_MS * 6);
}
