#!/usr/bin/env python3
"""Pushes tiny jobs through a running stokerd and samples its memory.

    drive.py --url URL --pid PID --jobs 20000 --every 1000 [--window 256]
             [--token-file DATA/token]

Keeps at most --window jobs submitted but not finished (so the daemon works
at its pace, not the client's), with a few submitting threads. After every
--every finished jobs it reads VmRSS (and VmHWM) from /proc/PID/status and
prints a row; at the end a markdown table and a verdict on growth. Prints
JSON lines with --json for machines.
"""
import argparse
import json
import queue
import sys
import threading
import time
import urllib.request

PATH = "/v1/projects/bench/locations/local/customJobs"
JOB = {
    "displayName": "tiny",
    "jobSpec": {"workerPoolSpecs": [{
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": 1,
        "containerSpec": {"imageUri": "local/sh", "command": ["/bin/sh", "-c", "true"]},
    }]},
}
TERMINAL = {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"}


TOKEN = ""


def call(url, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    headers = {"content-type": "application/json"}
    if TOKEN:
        headers["authorization"] = "Bearer " + TOKEN
    req = urllib.request.Request(url + path, data=data, method=method, headers=headers)
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read() or b"{}")


def rss_kib(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--every", type=int, default=1000)
    ap.add_argument("--window", type=int, default=256)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--token-file", help="the daemon's token file (DATA/token), if it has one")
    args = ap.parse_args()
    global TOKEN
    if args.token_file:
        with open(args.token_file) as f:
            TOKEN = f.read().strip()

    slots = threading.Semaphore(args.window)
    submitted = queue.Queue()
    failed = []
    counter = iter(range(args.jobs))
    lock = threading.Lock()

    def submitter():
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            slots.acquire()
            try:
                job = call(args.url, "POST", PATH, JOB)
                submitted.put(job["name"].rsplit("/", 1)[1])
            except Exception as e:  # noqa: BLE001 - a bench reports, never hides
                failed.append(str(e))
                slots.release()

    threads = [threading.Thread(target=submitter, daemon=True) for _ in range(args.threads)]
    for t in threads:
        t.start()

    start = time.monotonic()
    pending = []
    done = 0
    states = {}
    rows = [(0, 0.0, rss_kib(args.pid))]
    print("%8s %8s %10s %10s" % ("finished", "seconds", "VmRSS_KiB", "VmHWM_KiB"), flush=True)
    print("%8d %8.1f %10d %10d" % (0, 0.0, rows[0][2]["VmRSS"], rows[0][2]["VmHWM"]), flush=True)
    next_sample = args.every
    while done + len(failed) < args.jobs:
        while True:
            try:
                pending.append(submitted.get_nowait())
            except queue.Empty:
                break
        still = []
        for job_id in pending:
            state = call(args.url, "GET", PATH + "/" + job_id)["state"]
            if state in TERMINAL:
                done += 1
                states[state] = states.get(state, 0) + 1
                slots.release()
            else:
                still.append(job_id)
        pending = still
        while done >= next_sample:
            mem = rss_kib(args.pid)
            rows.append((next_sample, time.monotonic() - start, mem))
            print("%8d %8.1f %10d %10d" % (next_sample, rows[-1][1], mem["VmRSS"], mem["VmHWM"]),
                  flush=True)
            next_sample += args.every
        if pending:
            time.sleep(0.05)
    elapsed = time.monotonic() - start
    print()
    print("| jobs finished | elapsed s | VmRSS MiB | VmHWM MiB |")
    print("|---:|---:|---:|---:|")
    for n, t, mem in rows:
        print("| %d | %.1f | %.1f | %.1f |" % (n, t, mem["VmRSS"] / 1024, mem["VmHWM"] / 1024))
    print()
    print("states: %s; submit errors: %d%s" % (states, len(failed),
                                               (" (first: %s)" % failed[0]) if failed else ""))
    print("throughput: %.0f jobs/s" % (done / elapsed))
    # Growth after warm-up (caches filling, the retention index reaching its
    # cap): compare the sample half way through with the last one.
    if len(rows) >= 3:
        mid = rows[len(rows) // 2]
        base, last = mid[2]["VmRSS"], rows[-1][2]["VmRSS"]
        per_1000 = (last - base) / ((rows[-1][0] - mid[0]) / 1000)
        print("VmRSS from %d to %d jobs: %+d KiB (%+.1f KiB per 1,000 jobs)" % (
            mid[0], rows[-1][0], last - base, per_1000))
    return 0 if not failed and states.get("JOB_STATE_SUCCEEDED", 0) == args.jobs else 1


if __name__ == "__main__":
    sys.exit(main())
