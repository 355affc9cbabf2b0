// The queue (#/queue) and the nodes (#/nodes), docs/console.md.
import {
  api, ApiError, BASE, el, errorBox, fmtBytes, fmtDuration, fmtNum, fmtTime, jobId, LOG_POLL_MS,
  PAGE_SIZE, REFRESH_MS, shortState, show, state, stateBadge, stopPage, TERMINAL,
} from "./util.js";

// ---------- queue and nodes ----------

export function queuePage(p) {
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

export function nodesPage(p) {
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
