"""The web console's charts and comparisons (docs/console.md) in a real
headless Chromium against a real stokerd: a job whose three replicas write
one TensorBoard directory shows three lines (not one zigzag), smoothing,
log scale, hover values, drag-to-zoom and the wall-time axis from mouse and
keyboard; several jobs overlaid and tabulated; GPU charts per replica from
the fake NVML. Skips like test_console.py without Chromium. Screenshots go
to $STOKER_ARTIFACTS_DIR, else <repo>/build/artifacts/console/.
"""
import copy
import math
import os
import re
import unittest

import harness
from test_console import ConsoleBase, WAIT
from test_training_metrics import WRITER

try:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select
except ImportError:  # ConsoleBase.setUp reports it
    pass

# Each process writes its own event file (named by host and pid, as
# TensorFlow and PyTorch name theirs) into the job's one log directory: a
# noisy decaying loss over 60 steps. The trainer of workerpool1-1 leaves
# the writing to a child process (its replica's telemetry names it); the
# file of workerpool1-0 says it was written on another machine (as a file
# copied into the log directory would), so no replica is its writer.
REPLICA = WRITER + r'''
import random, socket, subprocess, sys
started = time.time()
task = json.loads(os.environ["CLUSTER_SPEC"])["task"]
if (task["type"], task["index"]) == ("workerpool1", 1) and "CHILD" not in os.environ:
    sys.exit(subprocess.run([sys.executable, "-c", os.environ["TRAINER"]],
                            env=dict(os.environ, CHILD="1")).returncode)
random.seed(os.getpid())
base = random.uniform(20, 100)
host = "elsewhere" if (task["type"], task["index"]) == ("workerpool1", 0) else socket.gethostname()
name = "events.out.tfevents.%d.%s.%d.0.v2" % (time.time(), host, os.getpid())
with open(os.path.join(logs, "." + name), "wb") as f:
    f.write(version)
    for step in range(1, 61):
        loss = base * 0.95 ** step * (1 + 0.3 * random.uniform(-1, 1))
        f.write(record(event(step, [simple("loss", loss)])))
os.rename(os.path.join(logs, "." + name), os.path.join(logs, name))
# The job ends with its chief: every replica waits for all three files.
deadline = time.time() + 60
while len([n for n in os.listdir(logs) if n.startswith("events.out")]) < 3 and time.time() < deadline:
    time.sleep(0.05)
# Past the replica supervisors' first telemetry sample (one second in).
time.sleep(max(0, started + 3 - time.time()))
'''

# One process, a loss of SCALE * 10 / step for 20 steps: its last is SCALE / 2.
SCALED = WRITER + r'''
with open(os.path.join(logs, "events.out.tfevents.1.host"), "wb") as f:
    f.write(version)
    for step in range(1, 21):
        f.write(record(event(step, [simple("loss", float(os.environ["SCALE"]) * 10 / step)])))
'''


def python_job(name, source, replicas=1, env=()):
    # exec: the trainer the supervisor started (trainer.json's pid) is python itself.
    job = harness.container_job(name, 'exec python3 -c "$TRAINER"', env=[("TRAINER", source)] + list(env))
    if replicas > 1:
        pool = copy.deepcopy(job["jobSpec"]["workerPoolSpecs"][0])
        pool["replicaCount"] = replicas - 1
        job["jobSpec"]["workerPoolSpecs"].append(pool)
    return job


def polyline(svg_el, css):
    """The (x, y) pixels of the first polyline matching css in the chart."""
    found = svg_el.find_elements(By.CSS_SELECTOR, css)
    if not found:
        return []
    return [tuple(map(float, p.split(","))) for p in found[0].get_attribute("points").split()]


def roughness(points):
    return sum(abs(b[1] - a[1]) for a, b in zip(points, points[1:]))


class ConsoleChartsTest(ConsoleBase):

    def metric_chart(self, d, title):
        return self.until(d, lambda d: d.find_element(
            By.CSS_SELECTOR, "svg.chart[aria-label='%s']" % title), "the chart " + title)

    def test_replicas_are_separate_lines_and_the_chart_smooths_scales_zooms_and_hovers(self):
        job_id = self.submit(python_job("tb-replicas", REPLICA, replicas=3))
        self.assertEqual(self.wait_state(job_id, timeout=WAIT * 2)["state"], "JOB_STATE_SUCCEEDED")
        # The API: one series per writer, each its own 60 steps in order,
        # named by the replica whose trainer (or the trainer's child, for
        # workerpool1-1) wrote it; the file from "another machine" keeps
        # its host and pid.
        status, body = self.api("GET", self.job_path(job_id) + "/trainingMetrics")
        self.assertEqual(status, 200, body)
        series = [s for s in body["series"] if s["name"] == "loss"]
        self.assertEqual(len(series), 3, body)
        self.assertEqual(len({s["writer"] for s in series}), 3)
        for s in series:
            self.assertRegex(s["writer"], r"^\S+ pid \d+$")
        self.assertEqual(sorted(s["replica"] for s in series if "replica" in s),
                         ["workerpool0-0", "workerpool1-1"], body)
        values = {}
        for s in series:
            self.assertEqual([p["step"] for p in s["points"]], list(range(1, 61)))
            values[s.get("replica", s["writer"])] = {p["step"]: p["value"] for p in s["points"]}
        child = next(s["writer"] for s in series if "replica" not in s)
        self.assertTrue(child.startswith("elsewhere pid "), child)

        d = self.browser()
        self.sign_in(d, self.daemon.token)
        self.until(d, lambda d: "admin" in self.text(d, "#who"), "the admin signed in")
        d.get(self.daemon.url + "/#/jobs/" + job_id)
        title = "loss (tensorboard)"
        chart = self.until(d, lambda d: (lambda c: c if c.get_attribute("data-points") == "180" else None)(
            self.metric_chart(d, title)), "180 points")
        self.assertEqual(chart.get_attribute("data-series"), "3")
        legend = sorted(t.text for t in chart.find_elements(By.CSS_SELECTOR, ".legend text"))
        self.assertEqual(legend, sorted(values))
        self.assertEqual(legend, sorted(["workerpool0-0", "workerpool1-1", child]))

        # Hover: the values of every replica at the step under the mouse.
        ActionChains(d).move_to_element_with_offset(chart, 10, 0).perform()
        tip = self.until(d, lambda d: (lambda t: t if t.is_displayed() else None)(
            d.find_element(By.CSS_SELECTOR, "#metrics .chart-tip")), "the hover values")
        step = int(re.search(r"step (\d+)", tip.text).group(1))
        self.assertTrue(20 <= step <= 45, tip.text)
        rows = tip.find_elements(By.CSS_SELECTOR, ".tip-row")
        self.assertEqual(len(rows), 3)
        for r in rows:
            writer, value = r.text.rsplit(": ", 1)
            expected = values[writer][step]
            self.assertAlmostEqual(float(value), expected, delta=abs(expected) * 1e-3)

        # Smoothing from the keyboard: the smoothed lines are calmer than the raw ones.
        slider = d.find_element(By.ID, "smoothing")
        slider.send_keys(Keys.END)
        self.until(d, lambda d: self.text(d, "#smoothing-value") == "0.99", "smoothing 0.99")
        slider.send_keys(*[Keys.ARROW_LEFT] * 19)
        self.until(d, lambda d: self.text(d, "#smoothing-value") == "0.80", "smoothing 0.80")
        chart = self.metric_chart(d, title)
        self.assertEqual(len(chart.find_elements(By.CSS_SELECTOR, "polyline.smoothed")), 3)
        self.assertEqual(len(chart.find_elements(By.CSS_SELECTOR, "polyline.raw")), 3)
        raw, smoothed = polyline(chart, "polyline.raw"), polyline(chart, "polyline.smoothed")
        self.assertEqual(len(raw), 60)
        self.assertLess(roughness(smoothed), 0.6 * roughness(raw))
        self.shot(d, "job-replicas-smoothed")

        # Log scale: the y ticks are 1, 2 and 5 times powers of ten.
        d.find_element(By.ID, "log-y").click()
        chart = self.until(d, lambda d: (lambda c: c if c.get_attribute("data-log-y") == "1" else None)(
            self.metric_chart(d, title)), "a log-scaled chart")
        ticks = [float(t.text) for t in chart.find_elements(By.CSS_SELECTOR, ".axes text[text-anchor='end']")]
        self.assertGreaterEqual(len(ticks), 2)
        for t in ticks:
            mantissa = round(t / 10 ** math.floor(math.log10(t)), 6)
            self.assertIn(mantissa, (1, 2, 5), ticks)

        # Drag to zoom: the x axis shows a part of the 60 steps; double-click resets.
        def x_ticks(c):
            return [float(t.text) for t in c.find_elements(By.CSS_SELECTOR, "text.x-tick")]
        full = x_ticks(chart)
        ActionChains(d).move_to_element_with_offset(chart, -120, 0).click_and_hold() \
            .move_by_offset(90, 0).release().perform()
        chart = self.until(d, lambda d: (lambda c: c if c.get_attribute("data-zoomed") == "1" else None)(
            self.metric_chart(d, title)), "a zoomed chart")
        # The drag spans pixels 110 to 200 of 460 (the plot: 56 to 448 for steps 1 to 60).
        zoomed = x_ticks(chart)
        self.assertGreaterEqual(len(zoomed), 2)
        for t in zoomed:
            self.assertTrue(5 <= t <= 30, zoomed)
        self.shot(d, "job-replicas-zoomed")
        # Shift-drag pans: dragging the plot to the left shows later steps.
        ActionChains(d).key_down(Keys.SHIFT).move_to_element_with_offset(chart, 0, 0).click_and_hold() \
            .move_by_offset(-80, 0).release().key_up(Keys.SHIFT).perform()
        chart = self.until(d, lambda d: (lambda c: c if x_ticks(c) and min(x_ticks(c)) > min(zoomed) else None)(
            self.metric_chart(d, title)), "a panned chart")
        self.assertEqual(chart.get_attribute("data-zoomed"), "1")
        panned = x_ticks(chart)
        self.assertAlmostEqual(max(panned) - min(panned), max(zoomed) - min(zoomed), delta=5)  # same width
        ActionChains(d).double_click(chart).perform()
        chart = self.until(d, lambda d: (lambda c: c if c.get_attribute("data-zoomed") == "0" else None)(
            self.metric_chart(d, title)), "the zoom reset")
        self.assertEqual(x_ticks(chart), full)
        # From the keyboard: + zooms in, 0 resets.
        box = d.find_element(By.CSS_SELECTOR, "#metrics figure.chart-box")
        box.send_keys("+")
        self.until(d, lambda d: self.metric_chart(d, title).get_attribute("data-zoomed") == "1", "+ zooms")
        d.find_element(By.CSS_SELECTOR, "#metrics figure.chart-box").send_keys("0")
        self.until(d, lambda d: self.metric_chart(d, title).get_attribute("data-zoomed") == "0", "0 resets")

        # Wall time on the x axis: clock times.
        Select(d.find_element(By.ID, "x-axis")).select_by_value("wall")
        seen = []  # the last ticks read, for the message if they never become clock times

        def clock_times(d):
            seen[:] = [t.text for t in self.metric_chart(d, title)
                       .find_elements(By.CSS_SELECTOR, "text.x-tick")]
            return all(":" in t for t in seen)
        try:
            self.until(d, clock_times, "clock times")
        except AssertionError as e:
            raise AssertionError("%s; the last x ticks read: %s; x-axis: %s" % (
                e, seen, d.find_element(By.ID, "x-axis").get_attribute("value"))) from e

    def test_several_jobs_are_overlaid_and_tabulated(self):
        ids = [self.submit(python_job("scaled-%d" % k, SCALED, env=[("SCALE", str(k))]))
               for k in (1, 2, 3)]
        for job_id in ids:
            self.assertEqual(self.wait_state(job_id, timeout=WAIT * 2)["state"], "JOB_STATE_SUCCEEDED")
        d = self.browser()
        self.sign_in(d, self.daemon.token)
        for job_id in ids:
            self.until(d, lambda d: d.find_element(
                By.CSS_SELECTOR, "tr[data-job='%s'] input.pick" % job_id), "job %s listed" % job_id).click()
        button = d.find_element(By.ID, "compare")
        self.assertEqual(button.text, "Compare 3 selected")
        button.click()
        rows = self.until(d, lambda d: (lambda r: r if len(r) == 3 else None)(
            d.find_elements(By.CSS_SELECTOR, "#compare-table tbody tr")), "3 runs compared")
        last = {r.get_attribute("data-run"): r.find_element(By.CSS_SELECTOR, "td[data-metric='loss']").text
                for r in rows}
        self.assertEqual(last, {ids[0]: "0.5", ids[1]: "1", ids[2]: "1.5"})
        chart = self.until(d, lambda d: d.find_element(
            By.CSS_SELECTOR, "#compare-metrics svg.chart[aria-label='loss (tensorboard)']"), "the overlay")
        self.assertEqual(chart.get_attribute("data-series"), "3")
        self.assertEqual(chart.get_attribute("data-points"), "60")
        legend = sorted(t.text for t in chart.find_elements(By.CSS_SELECTOR, ".legend text"))
        self.assertEqual(legend, sorted("job " + i for i in ids))
        self.shot(d, "compare-jobs")


FAKE_NVML = os.path.join(os.path.dirname(os.path.abspath(harness.STOKER)), "..",
                         "src", "resources", "libfake_nvml_for_test.so")


class ConsoleGpuTest(ConsoleBase):
    """The fake NVML the unit tests use: an H100 37% busy at 300 W (device
    figures: the trainer, a sleep, has no per-process GPU samples)."""
    config = harness.StokerTestCase.config + """
inventory: {cpus: 32, memory_gb: 256}
gpu_telemetry_seconds: 0.5
telemetry_seconds: 0.5
"""

    def setUp(self):
        if not os.path.exists(FAKE_NVML):
            self.fail("the fake NVML library is not built: " + FAKE_NVML)
        os.environ["STOKER_NVML_LIBRARY"] = os.path.abspath(FAKE_NVML)
        try:
            super().setUp()
        finally:
            del os.environ["STOKER_NVML_LIBRARY"]

    def test_gpu_charts_per_replica(self):
        job = harness.container_job("gpu-charts", "sleep 4", machine="a3-highgpu-1g",
                                    accelerator=("NVIDIA_H100_80GB", 1))
        job_id = self.submit(job)
        self.assertEqual(self.wait_state(job_id, timeout=WAIT * 2)["state"], "JOB_STATE_SUCCEEDED")
        d = self.browser()
        self.sign_in(d, self.daemon.token)
        self.until(d, lambda d: "admin" in self.text(d, "#who"), "the admin signed in")
        d.get(self.daemon.url + "/#/jobs/" + job_id)
        for title, value in (("GPU utilisation %", 37.0), ("GPU power (W)", 300.0)):
            chart = self.until(d, lambda d: d.find_element(
                By.CSS_SELECTOR, "#telemetry svg.chart[aria-label='%s']" % title), title)
            self.assertGreaterEqual(int(chart.get_attribute("data-points")), 2)
            ys = [float(c.find_element(By.TAG_NAME, "title").get_attribute("textContent").rsplit(", ", 1)[1])
                  for c in chart.find_elements(By.CSS_SELECTOR, "circle.pt")]
            self.assertTrue(ys)
            for y in ys:
                self.assertAlmostEqual(y, value, delta=value * 0.2)
        series = d.find_element(By.CSS_SELECTOR, "#telemetry svg.chart[aria-label='GPU memory (MiB)']") \
            .find_elements(By.CSS_SELECTOR, "g.series")
        self.assertEqual([s.get_attribute("data-series") for s in series], ["workerpool0-0 GPU 0"])
        self.shot(d, "job-gpu")


if __name__ == "__main__":
    unittest.main()
