#!/usr/bin/env python3
"""Web console charts benchmark (issue #32): how long a headless Chromium
takes to paint a job page whose TensorBoard directory holds 100,000 metric
points, and the comparison of 8 such runs overlaid.

    STOKER_BIN_DIR=build/bin python3 bench/console_charts_bench.py [--runs 8]
        [--points 100000] [--rounds 10]

Needs chromium, chromium-driver and python3-selenium (scripts/install-deps.sh
--test). Each run is a job that copies one event file (one scalar `loss`,
--points steps, written here with the same hand encoder as the e2e tests)
into its AIP_TENSORBOARD_LOG_DIR. "Painted" is the page's own mark, set one
frame after its charts are in the document (stoker-job-metrics-painted,
stoker-compare-painted), from the navigation's start: the page load, the
sign-in check, the API reads and the drawing. The first round of each page
reads the files (the daemon caches them) and is reported apart. Prints a
table and one JSON line.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
import harness  # noqa: E402
from test_training_metrics import WRITER  # noqa: E402

from console_bench import Conn, browser  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

JOBS = "/v1/projects/local/locations/local/customJobs"


def event_file(path, points):
    """Writes `points` steps of a noisy decaying loss, as a trainer would."""
    env = {"AIP_TENSORBOARD_LOG_DIR": os.path.dirname(path)}
    code = WRITER + r'''
import random
random.seed(1)
with open(OUT, "wb") as f:
    f.write(version)
    for step in range(1, N + 1):
        f.write(record(event(step, [simple("loss", 10 * 0.9999 ** step * (1 + 0.2 * random.random()))],
                             t=1.7e9 + step)))
'''.replace("OUT", repr(path)).replace("N + 1", str(points + 1))
    subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env), check=True)


def painted(driver, url, mark):
    driver.get("about:blank")
    driver.get(url)
    return harness.wait_for(lambda: driver.execute_script(
        "const m = performance.getEntriesByName(arguments[0]);"
        "return m.length ? m[0].startTime : null;", mark), 120, mark)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--points", type=int, default=100000)
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="stoker-console-charts-bench-")
    data = os.path.join(tmp, "data")
    os.makedirs(data)
    source = os.path.join(tmp, "events", "events.out.tfevents.1.bench")
    os.makedirs(os.path.dirname(source))
    t0 = time.monotonic()
    event_file(source, args.points)
    write_s = time.monotonic() - t0
    daemon = harness.Daemon(data, harness.DEFAULT_CONFIG).start()
    driver = None
    try:
        c = Conn(daemon.url, daemon.token)
        ids = []
        for k in range(args.runs):
            job = harness.container_job(
                "curve-%d" % k, 'mkdir -p "$AIP_TENSORBOARD_LOG_DIR" && '
                'cp %s "$AIP_TENSORBOARD_LOG_DIR/"' % source)
            status, body, _, _ = c.call("POST", JOBS, job)
            assert status == 200, body
            ids.append(json.loads(body)["name"].rsplit("/", 1)[1])
        for job_id in ids:
            harness.wait_for(lambda: json.loads(c.call("GET", JOBS + "/" + job_id)[1])["state"]
                             == "JOB_STATE_SUCCEEDED", 120, "job %s to succeed" % job_id)
        # The route's own time, cold (the files read) then warm (cached).
        cold = c.call("GET", JOBS + "/" + ids[0] + "/trainingMetrics")
        assert cold[0] == 200, cold[1][:300]
        warm = [c.call("GET", JOBS + "/" + ids[0] + "/trainingMetrics")[3] for _ in range(args.rounds)]

        driver = browser(tmp)
        driver.get(daemon.url + "/")
        box = harness.wait_for(lambda: driver.find_elements(By.ID, "token"), 30, "sign-in")[0]
        box.send_keys(daemon.token)
        driver.find_element(By.ID, "signin-button").click()
        harness.wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "#jobs-body tr[data-job]"),
                         60, "the jobs list")
        results = {}
        for name, url, mark in (
                ("job page, 1 run", daemon.url + "/#/jobs/" + ids[-1], "stoker-job-metrics-painted"),
                ("compare, %d runs overlaid" % args.runs, daemon.url + "/#/compare?jobs=" + ",".join(ids),
                 "stoker-compare-painted")):
            first = painted(driver, url, mark)
            times = [painted(driver, url, mark) for _ in range(args.rounds)]
            chart = driver.find_element(By.CSS_SELECTOR, "svg.chart[aria-label='loss (tensorboard)']")
            results[name] = {"first_ms": first, "p50_ms": statistics.median(times), "max_ms": max(times),
                             "series": int(chart.get_attribute("data-series")),
                             "points_drawn": int(chart.get_attribute("data-points"))}
        print("%d runs x %d points of `loss` (event file %.1f MB, written in %.0f s)" % (
            args.runs, args.points, os.path.getsize(source) / 1e6, write_s))
        print("trainingMetrics of one run: first read %.0f ms, then p50 %.1f ms (%d bytes)" % (
            cold[3], statistics.median(warm), len(cold[1])))
        print("%-28s %10s %10s %10s %8s %8s" % ("painted (navigation start)", "first", "p50", "max",
                                               "series", "points"))
        for name, r in results.items():
            print("%-28s %7.0f ms %7.0f ms %7.0f ms %8d %8d" % (name, r["first_ms"], r["p50_ms"], r["max_ms"],
                                                               r["series"], r["points_drawn"]))
        print(json.dumps({"runs": args.runs, "points": args.points, "rounds": args.rounds,
                          "route_first_ms": cold[3], "route_p50_ms": statistics.median(warm),
                          "pages": results}))
    finally:
        if driver:
            driver.quit()
        daemon.kill(signal.SIGTERM)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
