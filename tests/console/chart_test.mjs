// The console chart's pure parts (web/console/chart.js), run by Node's own
// test runner: `node --test tests/console/`. The browser tests
// (tests/e2e/test_console*.py) drive the whole page.
import assert from "node:assert/strict";
import test from "node:test";

import { axis, timeLabel } from "../../web/console/chart.js";

const P0 = 56, P1 = 448;

function checkTicks(lo, hi) {
  const a = axis(lo, hi, false, P0, P1, 5, 0);
  assert.ok(a.ticks.length >= 2, `${a.ticks} over [${lo}, ${hi}]`);
  for (let i = 0; i < a.ticks.length; i++) {
    const px = a.px(a.ticks[i]);
    assert.ok(px >= P0 - 1e-6 && px <= P1 + 1e-6, `tick ${a.ticks[i]} at ${px}px is off the axis`);
    if (i > 0) assert.ok(a.ticks[i] > a.ticks[i - 1], `ticks ${a.ticks} repeat`);
  }
  return a.ticks;
}

test("ticks are round numbers on the axis", () => {
  assert.deepEqual(checkTicks(0, 60), [0, 20, 40, 60]);
  assert.deepEqual(checkTicks(-3.2, 7.9), [0, 5]);
  assert.deepEqual(checkTicks(0.001, 0.0042), [0.001, 0.002, 0.003, 0.004]);
});

test("a few milliseconds of unix time get distinct ticks on the axis", () => {
  // A trainer that logs 60 steps in 17 ms: the wall-time axis once showed
  // two ticks at one place and one outside the plot.
  const t0 = 1780000425.1234;
  assert.deepEqual(checkTicks(t0, t0 + 0.017), [1780000425.125, 1780000425.13, 1780000425.135, 1780000425.14]);
  checkTicks(t0, t0 + 0.0004);
  checkTicks(t0, t0 + 60);
  checkTicks(t0, t0 + 86400 * 3);
});

test("clock labels carry milliseconds only when asked", () => {
  const t = 1780000425.1234;
  assert.match(timeLabel(t, false), /\d:\d\d:\d\d/);
  assert.doesNotMatch(timeLabel(t, false), /\.\d{3}/);
  assert.match(timeLabel(t, true), /:\d\d\.123/);
});
