// Parallel coordinates of a study (docs/console.md): one vertical axis per
// parameter, in the parameter's own scale (log-scaled ones on a log axis,
// categorical values in their order of appearance), and the objective
// last; one line per trial, coloured from worst (light) to best (dark),
// the best trial drawn thick. The svg carries data-lines and data-axes.
import { fmtNum, svg } from "./util.js";
import { axis } from "./chart.js";

export function parallelCoordinates(study, params, metric, trials, valueOf, specOf, best) {
  const W = 940, H = 260, T = 34, B = 28, L = 50, R = 50;
  const cols = [...params.map((k) => ({ key: k, label: k, log: specOf(k).scaleType === "UNIT_LOG_SCALE", get: (t) => valueOf(t, k) })),
    { key: "__metric", label: metric.id + (metric.maximize ? " ↑" : " ↓"), log: false, get: (t) => t.__v }];
  const rows = trials.filter((t) => isFinite(t.__v));
  const root = svg("svg", {
    class: "chart parallel", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img",
    "aria-label": "parallel coordinates: " + cols.map((c) => c.label).join(", "),
    "data-lines": rows.length, "data-axes": cols.length,
  });
  root.append(svg("text", { x: L, y: 14, class: "chart-title" }, "Trials across parameters and " + metric.id));
  if (!rows.length) {
    root.append(svg("text", { x: W / 2, y: H / 2, class: "nodata", "text-anchor": "middle" }, "no data"));
    return root;
  }
  const step = (W - L - R) / Math.max(1, cols.length - 1);
  const axes = cols.map((c, i) => {
    const x = cols.length === 1 ? W / 2 : L + i * step;
    const raw = rows.map(c.get);
    const numeric = raw.every((v) => typeof v === "number" && isFinite(v) && (!c.log || v > 0));
    let pos, ticks;
    if (numeric) {
      const a = axis(Math.min(...raw), Math.max(...raw), c.log, H - B, T + 10, 4);
      pos = (v) => a.px(v);
      ticks = a.ticks.map((v) => [a.px(v), fmtNum(v)]);
    } else {
      const cats = [...new Set(raw.map(String))];
      const y = (k) => (cats.length === 1 ? (H - B + T + 10) / 2 : H - B - (k / (cats.length - 1)) * (H - B - T - 10));
      pos = (v) => y(cats.indexOf(String(v)));
      ticks = cats.map((v, k) => [y(k), v]);
    }
    const g = svg("g", { class: "axes pc-axis", "data-axis": c.key, "data-scale": numeric ? (c.log ? "log" : "linear") : "categorical" });
    g.append(svg("line", { x1: x, x2: x, y1: T + 10, y2: H - B }));
    g.append(svg("text", { x, y: T - 4, "text-anchor": "middle", class: "axis-label" }, c.label + (c.log ? " (log)" : "")));
    for (const [y, label] of ticks) g.append(svg("text", { x: x - 4, y: y + 3, "text-anchor": "end" }, label));
    return { x, pos, g, get: c.get };
  });
  const vs = rows.map((t) => t.__v);
  const lo = Math.min(...vs), hi = Math.max(...vs);
  const lines = svg("g", { class: "pc-lines" });
  for (const t of rows) {
    const q = hi > lo ? (t.__v - lo) / (hi - lo) : 1;
    const good = metric.maximize ? q : 1 - q;
    const pts = axes.map((a) => a.x.toFixed(1) + "," + a.pos(a.get(t)).toFixed(1)).join(" ");
    const line = svg("polyline", {
      points: pts, class: "pc-line" + (best && best.t === t ? " best-line" : ""), "data-trial": t.id,
      "stroke-opacity": (0.25 + 0.75 * good).toFixed(2),
    });
    line.append(svg("title", {}, "trial " + t.id + ": " + metric.id + " " + fmtNum(t.__v)));
    lines.append(line);
  }
  root.append(lines, ...axes.map((a) => a.g));
  return root;
}
