#!/usr/bin/env python3
"""Web console benchmark (issue #15): with N jobs in the store (default
10,000), how long stokerd takes to answer the console's first requests, how
long a headless Chromium takes to paint the jobs page, and how long a log
line takes from the trainer's write to the browser's page.

    STOKER_BIN_DIR=build-h-console/bin python3 bench/console_bench.py [--jobs 10000]
        [--rounds 15] [--log-lines 60]

Needs chromium, chromium-driver and python3-selenium (scripts/install-deps.sh
--test). The jobs are stored as the submit bench stores them: each asks for
the node's one (declared) GPU and sleeps, so the first runs and the rest
queue; the store holds N jobs and the scheduler sees N-1 waiting. Prints a
table and one JSON line.
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import harness  # noqa: E402

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

CONFIG = harness.DEFAULT_CONFIG + """
inventory: {cpus: 2, memory_gb: 8, gpus: [{type: NVIDIA_TESLA_T4, memory_gb: 16}]}
"""
JOBS = "/v1/projects/local/locations/local/customJobs"


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


class Conn:
    """One keep-alive HTTP connection with the admin's token."""

    def __init__(self, url, token):
        u = urllib.parse.urlparse(url)
        self.c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        self.token = token

    def call(self, method, path, body=None):
        headers = {"Authorization": "Bearer " + self.token, "Content-Type": "application/json"}
        t0 = time.perf_counter()
        self.c.request(method, path, body=json.dumps(body) if body is not None else None,
                       headers=headers)
        r = self.c.getresponse()
        first = time.perf_counter()  # status line and headers read
        data = r.read()
        return r.status, data, (first - t0) * 1000, (time.perf_counter() - t0) * 1000


def fill(url, token, n, clients=4):
    job = {"displayName": "bench", "jobSpec": {"workerPoolSpecs": [{
        "machineSpec": {"machineType": "n1-standard-1", "acceleratorType": "NVIDIA_TESLA_T4",
                        "acceleratorCount": 1},
        "replicaCount": 1,
        "containerSpec": {"imageUri": harness.IMAGE, "command": ["/bin/sleep", "100000"]}}]}}
    left = [n]
    lock = threading.Lock()

    def worker():
        c = Conn(url, token)
        while True:
            with lock:
                if left[0] <= 0:
                    return
                left[0] -= 1
            status, data, _, _ = c.call("POST", JOBS, job)
            if status != 200:
                raise SystemExit("submit failed: %s %s" % (status, data[:300]))

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def browser(tmp):
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000", "--user-data-dir=" + os.path.join(tmp, "chrome")):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--log-lines", type=int, default=60)
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="stoker-console-bench-")
    data = os.path.join(tmp, "data")
    os.makedirs(data)
    daemon = harness.Daemon(data, CONFIG).start()
    driver = None
    try:
        token = daemon.token
        t0 = time.monotonic()
        fill(daemon.url, token, args.jobs)
        fill_s = time.monotonic() - t0
        c = Conn(daemon.url, token)
        server = {}
        for name, path in (
                ("GET / (index.html)", "/"),
                ("GET /console/app.js", "/console/app.js"),
                ("list page (50, newest first)", JOBS + "?pageSize=50&orderBy=create_time%20desc"),
                ("list page, state filter", JOBS + "?pageSize=50&orderBy=create_time%20desc&filter="
                 + urllib.parse.quote("state=JOB_STATE_QUEUED")),
                ("list page, owner filter, no match", JOBS + "?pageSize=50&orderBy=create_time%20desc"
                 "&filter=" + urllib.parse.quote('user="nobody-here"')),
        ):
            firsts, totals = [], []
            for _ in range(args.rounds):
                status, body, first, total = c.call("GET", path)
                assert status == 200, (path, status, body[:200])
                firsts.append(first)
                totals.append(total)
            server[name] = {"ttfb_p50_ms": statistics.median(firsts), "ttfb_max_ms": max(firsts),
                            "total_p50_ms": statistics.median(totals), "bytes": len(body)}

        driver = browser(tmp)
        driver.get(daemon.url + "/")
        box = harness.wait_for(lambda: driver.find_elements(By.ID, "token"), 30, "sign-in")[0]
        box.send_keys(token)
        driver.find_element(By.ID, "signin-button").click()
        harness.wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "#jobs-body tr[data-job]"),
                         60, "the jobs list")
        paints, ttfbs, rows = [], [], 0
        for _ in range(args.rounds):
            driver.get("about:blank")
            driver.get(daemon.url + "/#/jobs")
            mark = harness.wait_for(lambda: driver.execute_script(
                "const m = performance.getEntriesByName('stoker-jobs-painted');"
                "return m.length ? m[0].startTime : null;"), 60, "the painted jobs page")
            nav = driver.execute_script(
                "const n = performance.getEntriesByType('navigation')[0];"
                "return [n.requestStart, n.responseStart];")
            ttfbs.append(nav[1] - nav[0])
            paints.append(mark)
            rows = len(driver.find_elements(By.CSS_SELECTOR, "#jobs-body tr[data-job]"))
        browser_result = {"ttfb_p50_ms": statistics.median(ttfbs),
                          "painted_p50_ms": statistics.median(paints),
                          "painted_max_ms": max(paints), "rows": rows}

        # Log latency: a job that runs at once (no GPU) prints its own clock
        # every 100 ms; the page records when each line appears.
        trainer = ("i=0; while [ $i -lt %d ]; do i=$((i+1)); echo \"L $i $(date +%%s%%3N)\"; "
                   "sleep 0.1; done; sleep 600") % args.log_lines
        job = harness.container_job("log-bench", trainer, machine="n1-standard-1")
        status, body, _, _ = c.call("POST", JOBS, job)
        assert status == 200, body
        job_id = json.loads(body)["name"].rsplit("/", 1)[1]
        driver.get(daemon.url + "/#/jobs/" + job_id)
        harness.wait_for(lambda: driver.find_elements(By.ID, "log"), 30, "the job page")
        driver.execute_script("""
          window.__seen = {};
          const log = document.getElementById('log');
          new MutationObserver(() => {
            const now = Date.now();
            for (const line of log.textContent.split('\\n')) {
              const m = /^L (\\d+) (\\d+)$/.exec(line);
              if (m && !(m[1] in window.__seen)) window.__seen[m[1]] = now - Number(m[2]);
            }
          }).observe(log, {childList: true, characterData: true, subtree: true});""")
        seen = harness.wait_for(lambda: (lambda s: s if len(s) >= args.log_lines - 1 else None)(
            driver.execute_script("return window.__seen;")), 120, "the log lines")
        # Lines already written before the observer started are not latencies.
        first = min(int(k) for k in seen)
        lat = [v for k, v in seen.items() if int(k) > first]
        log_result = {"lines": len(lat), "p50_ms": statistics.median(lat), "p95_ms": pct(lat, 95),
                      "max_ms": max(lat)}
        c.call("POST", JOBS + "/" + job_id + ":cancel", {})

        print("jobs in store: %d (filled in %.0f s)" % (args.jobs, fill_s))
        print("%-36s %10s %10s %12s %8s" % ("server (keep-alive HTTP client)", "TTFB p50", "TTFB max",
                                             "total p50", "bytes"))
        for name, r in server.items():
            print("%-36s %8.1f ms %7.1f ms %9.1f ms %8d" % (name, r["ttfb_p50_ms"], r["ttfb_max_ms"],
                                                          r["total_p50_ms"], r["bytes"]))
        print("browser: document TTFB p50 %.1f ms; jobs page painted p50 %.0f ms, max %.0f ms "
              "(%d rows), %d rounds" % (browser_result["ttfb_p50_ms"], browser_result["painted_p50_ms"],
                                        browser_result["painted_max_ms"], rows, args.rounds))
        print("log line write -> page: p50 %.0f ms, p95 %.0f ms, max %.0f ms over %d lines" % (
            log_result["p50_ms"], log_result["p95_ms"], log_result["max_ms"], log_result["lines"]))
        print(json.dumps({"jobs": args.jobs, "server": server, "browser": browser_result,
                          "log": log_result}))
    finally:
        if driver:
            driver.quit()
        # Replicas end with their jobs: cancel the running ones, then stop the
        # daemon; any supervisor of this data dir still alive is ended by its pid.
        try:
            c = Conn(daemon.url, daemon.token)
            q = "?pageSize=1000&filter=" + urllib.parse.quote("state=JOB_STATE_RUNNING")
            for j in json.loads(c.call("GET", JOBS + q)[1]).get("customJobs", []):
                c.call("POST", JOBS + "/" + j["name"].rsplit("/", 1)[1] + ":cancel", {})
        except OSError:
            pass
        daemon.kill(signal.SIGTERM)
        left = subprocess.run(["pgrep", "-f", "stoker-run.*" + data], capture_output=True,
                              text=True).stdout.split()
        for pid in left:
            try:
                os.kill(int(pid), signal.SIGTERM)
            except OSError:
                pass
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
