// One job (#/jobs/ID), docs/console.md: its head, why it waits, the log,
// training-metric and telemetry charts, events, outputs and spec.
import {
  api, ApiError, BASE, el, errorBox, fmtBytes, fmtDuration, fmtNum, fmtTime, jobId, LOG_POLL_MS,
  PAGE_SIZE, REFRESH_MS, shortState, show, state, stateBadge, stopPage, TERMINAL,
} from "./util.js";
import { chart } from "./chart.js";
import { metricsPanel } from "./metrics.js";
import { usageCard } from "./usage.js";

function chartBox(id, title) {
  return el("div", { class: "charts", id }, el("h2", {}, title), el("p", { class: "muted" }, "loading…"));
}

// ---------- one job ----------

export function jobPage(p, id) {
  const path = BASE + "/customJobs/" + encodeURIComponent(id);
  const head = el("div", { id: "job-head" }, el("h1", {}, "Job " + id));
  const why = el("div", { id: "why" });
  const events = el("div", { id: "events" });
  const logBox = el("pre", { id: "log", class: "log", tabindex: 0 });
  const replicaSel = el("select", { id: "replica" });
  const follow = el("input", { type: "checkbox", id: "follow", checked: true });
  const panel = metricsPanel("metrics-panel");
  const metrics = el("div", { class: "charts", id: "metrics" }, el("h2", {}, "Training metrics"), panel.root);
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
    const canCancel = state.session.role === "admin" ||
      (state.session.role === "user" && job.stoker && job.stoker.user === state.session.user);
    const button = el("button", {
      type: "button", id: "cancel", class: "danger",
      disabled: !canCancel || TERMINAL.has(job.state) || job.state === "JOB_STATE_CANCELLING",
      title: canCancel ? "Cancel this job" : "Your role (" + state.session.role + ") may not cancel this job",
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
      el("table", { class: "kv" }, rows.filter((r) => r[1]).map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v)))),
      usageCard(job.stoker && job.stoker.usage, "job-usage"));
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
    let data;
    try {
      data = await api("GET", path + "/trainingMetrics");
    } catch (e) {
      if (e.status === 404) panel.message(el("p", { class: "muted nodata" }, "no data (this stokerd serves no training metrics)"));
      else if (e.status !== 401) panel.message(errorBox(e));
      return job && !TERMINAL.has(job.state);
    }
    panel.set([{ label: "job " + id, data }]);
    // For bench/console_charts_bench.py: the first metric charts painted after this navigation.
    if ((data.series || []).length && !performance.getEntriesByName("stoker-job-metrics-painted").length) {
      requestAnimationFrame(() => setTimeout(() => performance.mark("stoker-job-metrics-painted"), 0));
    }
    return job && !TERMINAL.has(job.state);
  }

  const telemetryViews = new Map(); // chart title -> its zoom, kept across refreshes
  const telemetryView = (title) => {
    if (!telemetryViews.has(title)) telemetryViews.set(title, { x: null, y: null });
    return telemetryViews.get(title);
  };

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
    const cpu = [], rss = [], gpuUtil = [], gpuMem = [], gpuPower = [];
    for (const r of reps) {
      const label = r.replica + (reps.some((o) => o.replica === r.replica && o !== r) ? " #" + r.attempt : "");
      const pts = r.points || [];
      cpu.push({ name: label, points: pts.filter((p) => p.cpuPercent !== undefined).map((p) => [p.t, p.cpuPercent]) });
      rss.push({ name: label, points: pts.filter((p) => p.rssBytes !== undefined).map((p) => [p.t, p.rssBytes / 1048576]) });
      const gpus = new Map();
      for (const p of pts) {
        for (const g of p.gpus || []) {
          if (!gpus.has(g.index)) gpus.set(g.index, { util: [], mem: [], power: [] });
          // The replica's own SM share; without per-process samples, the device's.
          const util = g.utilPercent !== undefined ? g.utilPercent : g.deviceUtilPercent;
          if (util !== undefined) gpus.get(g.index).util.push([p.t, util]);
          if (g.memoryBytes !== undefined) gpus.get(g.index).mem.push([p.t, g.memoryBytes / 1048576]);
          if (g.powerWatts !== undefined) gpus.get(g.index).power.push([p.t, g.powerWatts]);
        }
      }
      for (const [i, g] of gpus) {
        gpuUtil.push({ name: label + " GPU " + i, points: g.util });
        gpuMem.push({ name: label + " GPU " + i, points: g.mem });
        if (g.power.length) gpuPower.push({ name: label + " GPU " + i, points: g.power });
      }
    }
    const charts = [
      chart(cpu, { title: "CPU %", xTime: true, view: telemetryView("CPU %") }),
      chart(rss, { title: "Memory (RSS, MiB)", xTime: true, view: telemetryView("Memory (RSS, MiB)") }),
    ];
    if (gpuUtil.length) {
      charts.push(chart(gpuUtil, { title: "GPU utilisation %", xTime: true, view: telemetryView("GPU utilisation %") }));
      charts.push(chart(gpuMem, { title: "GPU memory (MiB)", xTime: true, view: telemetryView("GPU memory (MiB)") }));
      if (gpuPower.length) charts.push(chart(gpuPower, { title: "GPU power (W)", xTime: true, view: telemetryView("GPU power (W)") }));
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
