// Parallel coordinates of a study (docs/console.md): one vertical axis per
// parameter, in the parameter's own scale (log-scaled ones on a log axis,
// categorical values in their order of appearance), and the objective
// last; one line per trial, coloured from worst (light) to best (dark),
// the best trial drawn thick. The svg carries data-lines and data-axes.
//
// Brushing: a drag along an axis selects a range of it (a second drag on
// the same axis replaces it); trials outside any brushed range are dimmed,
// and the page's trial table shows only the others. A click on an axis
// clears its brush, a click on the plot's background or Escape all of
// them. From the keyboard, Tab to an axis: ↑ ↓ move its brush (making one
// first), + − grow and shrink it, Delete clears it, Escape clears all.
// The svg also carries data-brushes and data-selected (the lines kept).
import { fmtNum, svg } from "./util.js";
import { axis } from "./chart.js";

// A study's brushes, kept by its page across refreshes: axis key ("x", or
// "__metric" for the objective) -> {lo, hi} (a numeric axis's values) or
// {cats: [...]} (the categories of a categorical one).
export function brushes() {
  return new Map();
}

// The axis key of the objective in `brushes` and in `value` below.
export const METRIC_AXIS = "__metric";

function inBrush(b, v) {
  if (b.cats) return b.cats.includes(String(v));
  return typeof v === "number" && v >= b.lo && v <= b.hi;
}

// True when trial `t` lies in every brushed range; value(t, key) is its
// value on an axis (a parameter's, or the objective for METRIC_AXIS).
export function brushed(bs, t, value) {
  for (const [key, b] of bs) {
    if (!inBrush(b, value(t, key))) return false;
  }
  return true;
}

// onBrush() is called after the brushes change (the page redraws, with
// this chart). Without `bs` the chart cannot be brushed.
export function parallelCoordinates(study, params, metric, trials, valueOf, specOf, best, bs = null, onBrush = () => {}) {
  const W = 940, H = 260, T = 34, B = 28, L = 50, R = 50;
  const TOP = T + 10, BOTTOM = H - B;
  const cols = [...params.map((k) => ({ key: k, label: k, log: specOf(k).scaleType === "UNIT_LOG_SCALE", get: (t) => valueOf(t, k) })),
    { key: METRIC_AXIS, label: metric.id + (metric.maximize ? " ↑" : " ↓"), log: false, get: (t) => t.__v }];
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
    let pos, ticks, toPx, fromPx;
    const clamp = (y) => Math.min(BOTTOM, Math.max(TOP, y));
    if (numeric) {
      const a = axis(Math.min(...raw), Math.max(...raw), c.log, BOTTOM, TOP, 4);
      pos = (v) => a.px(v);
      ticks = a.ticks.map((v) => [a.px(v), fmtNum(v)]);
      toPx = (b) => [clamp(a.px(b.hi)), clamp(a.px(b.lo))];
      // A hundredth of a pixel wider, so that a line at the brush's end
      // stays in it after the round trip through pixels.
      fromPx = (y1, y2) => ({ lo: a.inv(y2 + 0.01), hi: a.inv(y1 - 0.01) });
    } else {
      const cats = [...new Set(raw.map(String))];
      const y = (k) => (cats.length === 1 ? (BOTTOM + TOP) / 2 : BOTTOM - (k / (cats.length - 1)) * (BOTTOM - TOP));
      pos = (v) => y(cats.indexOf(String(v)));
      ticks = cats.map((v, k) => [y(k), v]);
      toPx = (b) => {
        const ys = b.cats.filter((v) => cats.includes(v)).map((v) => pos(v));
        if (!ys.length) return [TOP, TOP];
        return [clamp(Math.min(...ys) - 6), clamp(Math.max(...ys) + 6)];
      };
      fromPx = (y1, y2) => ({ cats: cats.filter((v) => pos(v) >= y1 && pos(v) <= y2) });
    }
    const g = svg("g", { class: "axes pc-axis", "data-axis": c.key, "data-scale": numeric ? (c.log ? "log" : "linear") : "categorical" });
    g.append(svg("line", { x1: x, x2: x, y1: TOP, y2: BOTTOM }));
    g.append(svg("text", { x, y: T - 4, "text-anchor": "middle", class: "axis-label" }, c.label + (c.log ? " (log)" : "")));
    for (const [y, label] of ticks) g.append(svg("text", { x: x - 4, y: y + 3, "text-anchor": "end" }, label));
    return { key: c.key, label: c.label, x, pos, g, get: c.get, toPx, fromPx, clamp };
  });
  const value = (t, key) => axes.find((a) => a.key === key).get(t);
  const active = bs ? new Map([...bs].filter(([key]) => axes.some((a) => a.key === key))) : new Map();
  const kept = new Set(rows.filter((t) => brushed(active, t, value)));
  root.setAttribute("data-brushes", active.size);
  root.setAttribute("data-selected", kept.size);

  const vs = rows.map((t) => t.__v);
  const lo = Math.min(...vs), hi = Math.max(...vs);
  const lines = svg("g", { class: "pc-lines" });
  // The dimmed lines first, so that the kept ones are drawn over them.
  const ordered = [...rows.filter((t) => !kept.has(t)), ...kept];
  for (const t of ordered) {
    const q = hi > lo ? (t.__v - lo) / (hi - lo) : 1;
    const good = metric.maximize ? q : 1 - q;
    const pts = axes.map((a) => a.x.toFixed(1) + "," + a.pos(a.get(t)).toFixed(1)).join(" ");
    const line = svg("polyline", {
      points: pts, "data-trial": t.id, "stroke-opacity": (0.25 + 0.75 * good).toFixed(2),
      class: "pc-line" + (best && best.t === t ? " best-line" : "") + (kept.has(t) ? "" : " dimmed"),
    });
    line.append(svg("title", {}, "trial " + t.id + ": " + metric.id + " " + fmtNum(t.__v)));
    lines.append(line);
  }
  if (!bs) {
    root.append(lines, ...axes.map((a) => a.g));
    return root;
  }

  const changed = (focusKey) => {
    onBrush();
    // The page drew a new chart: give the focus back to the same axis.
    if (focusKey !== undefined) {
      const again = document.querySelector(`svg.parallel .pc-hit[data-axis="${CSS.escape(focusKey)}"]`);
      if (again) again.focus();
    }
  };
  const clearAll = (focusKey) => {
    if (!bs.size) return;
    bs.clear();
    changed(focusKey);
  };
  // The pointer's y in the svg's own units (it may be drawn scaled).
  const svgY = (ev) => {
    const r = root.getBoundingClientRect();
    return ((ev.clientY - r.top) * H) / (r.height || H);
  };
  const background = svg("rect", { class: "pc-background", x: 0, y: 0, width: W, height: H });
  background.addEventListener("click", () => clearAll());
  const hits = axes.map((a) => {
    const b = active.get(a.key);
    const shown = b ? a.toPx(b) : null;
    const rect = svg("rect", { class: "pc-brush", x: a.x - 7, width: 14, "data-axis": a.key,
      y: shown ? shown[0] : 0, height: shown ? Math.max(2, shown[1] - shown[0]) : 0,
      visibility: shown ? "visible" : "hidden" });
    const describe = b ? (b.cats ? b.cats.join(", ") || "nothing" : fmtNum(b.lo) + " to " + fmtNum(b.hi)) : "";
    const hit = svg("rect", {
      class: "pc-hit", x: a.x - 14, width: 28, y: TOP - 6, height: BOTTOM - TOP + 12, tabindex: 0,
      "data-axis": a.key, role: "slider", "aria-valuetext": b ? describe : "no brush",
      "aria-label": "brush " + a.label + " (drag, or ↑ ↓ to move, + − to resize, Delete to clear, Escape to clear all)",
    });
    hit.append(svg("title", {}, b ? a.label + ": " + describe + " (click to clear)" : "drag to select a range of " + a.label));
    const commit = (y1, y2) => {
      [y1, y2] = [a.clamp(Math.min(y1, y2)), a.clamp(Math.max(y1, y2))];
      bs.set(a.key, a.fromPx(y1, y2));
      changed(a.key);
    };
    let drag = null;
    hit.addEventListener("pointerdown", (ev) => {
      if (ev.button !== 0) return;
      ev.preventDefault(); // no text selection; the axis takes the focus (Escape clears)
      hit.focus();
      hit.setPointerCapture(ev.pointerId);
      drag = { y0: svgY(ev), y: svgY(ev) };
    });
    hit.addEventListener("pointermove", (ev) => {
      if (!drag) return;
      drag.y = svgY(ev);
      const y1 = a.clamp(Math.min(drag.y0, drag.y)), y2 = a.clamp(Math.max(drag.y0, drag.y));
      Object.entries({ y: y1, height: Math.max(1, y2 - y1), visibility: "visible" })
        .forEach(([k, v]) => rect.setAttribute(k, String(v)));
    });
    const end = (ev) => {
      if (!drag) return;
      const d = drag;
      drag = null;
      if (ev.type === "pointercancel") return changed(a.key);
      d.y = svgY(ev);
      if (Math.abs(d.y - d.y0) < 3) { // a click: clears this axis's brush
        if (bs.delete(a.key)) changed(a.key);
        return;
      }
      commit(d.y0, d.y);
    };
    hit.addEventListener("pointerup", end);
    hit.addEventListener("pointercancel", end);
    hit.addEventListener("keydown", (ev) => {
      const span = BOTTOM - TOP;
      const [y1, y2] = active.has(a.key) ? a.toPx(active.get(a.key)) : [TOP + 0.4 * span, TOP + 0.6 * span];
      const move = 0.05 * span;
      let next = null;
      if (ev.key === "ArrowUp") next = [Math.max(TOP, y1 - move), Math.max(TOP, y1 - move) + (y2 - y1)];
      else if (ev.key === "ArrowDown") next = [Math.min(BOTTOM, y2 + move) - (y2 - y1), Math.min(BOTTOM, y2 + move)];
      else if (ev.key === "+" || ev.key === "=") next = [y1 - move / 2, y2 + move / 2];
      else if (ev.key === "-" || ev.key === "_") next = y2 - y1 > move ? [y1 + move / 2, y2 - move / 2] : [y1, y2];
      else if (ev.key === "Delete" || ev.key === "Backspace") {
        ev.preventDefault();
        if (bs.delete(a.key)) changed(a.key);
        return;
      } else if (ev.key === "Escape") {
        ev.preventDefault();
        ev.stopPropagation();
        clearAll(a.key);
        return;
      } else return;
      ev.preventDefault();
      commit(next[0], next[1]);
    });
    return [hit, rect];
  });
  root.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape") clearAll();
  });
  root.append(background, lines, ...axes.map((a) => a.g), ...hits.flat());
  return root;
}
