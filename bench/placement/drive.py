#!/usr/bin/env python3
"""Jobs placed per second end to end: the same queue through Stoker and Slurm.

    drive.py [--url URL --token-file DATA/token] [--slurm] --jobs 300 --threads 4

With --url, submits --jobs one-vCPU CustomJobs (`/bin/sh -c true`) to a running
stokerd as fast as --threads clients can, waits for all to end, then reads
each job's events: "placed" is the transition to JOB_STATE_PENDING (the
scheduler gave it a slot), "ended" the transition to a terminal state. Times
are the daemon's event times against the client's submit time (same host,
same wall clock).

With --slurm, submits the same number of one-CPU jobs with `sbatch --wrap
true` from as many threads and polls `squeue` every --poll-ms: a job
"starts" the first poll that shows it RUNNING or no longer shows it (it ran
between two polls), and "ends" the first poll that no longer shows it. The
poll bounds the resolution of both (50 ms by default).

Prints one markdown table, side by side, with Stoker/Slurm ratios where
both ran, and a JSON line per side for machines (--json).
"""
import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import datetime, timezone

PATH = "/v1/projects/p/locations/l/customJobs"
JOB = {
    "displayName": "placebench",
    "jobSpec": {"workerPoolSpecs": [{
        "machineSpec": {"machineType": "n1-standard-1"},
        "replicaCount": 1,
        "containerSpec": {"imageUri": "local/sh", "command": ["/bin/sh", "-c", "true"]},
    }]},
}
TERMINAL = {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"}


def percentile(values, p):
    """Nearest-rank percentile of a non-empty list (p in 0..100)."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(p / 100 * len(s) + 0.5)) - 1))]


def fan_out(n, threads, submit_one):
    """Calls submit_one(i) for i in 0..n-1 from `threads` threads; returns the
    results in order of i. A failure is re-raised after all threads stop."""
    results = [None] * n
    errors = []
    lock = threading.Lock()
    counter = iter(range(n))

    def worker():
        while True:
            with lock:
                i = next(counter, None)
            if i is None or errors:
                return
            try:
                results[i] = submit_one(i)
            except Exception as e:  # noqa: BLE001 - re-raised below
                errors.append(e)
                return

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    return results


def summarize(name, submits, placed, ended, states):
    """The reported numbers from per-job wall-clock times (seconds since the
    epoch): submits, placed (start) and ended lists of equal length."""
    first = min(submits)
    wall = max(ended) - first
    place_wall = max(placed) - first
    lat = [(p - s) * 1000 for s, p in zip(submits, placed)]
    return {
        "side": name, "jobs": len(submits), "states": states,
        "submit_s": max(submits) - first,
        "wall_s": wall, "jobs_per_s": len(submits) / wall,
        "place_wall_s": place_wall, "placements_per_s": len(submits) / place_wall,
        "latency_p50_ms": percentile(lat, 50), "latency_p99_ms": percentile(lat, 99),
        "latency_max_ms": max(lat),
    }


# --- Stoker ---------------------------------------------------------------

def stoker_call(url, token, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    headers = {"content-type": "application/json"}
    if token:
        headers["authorization"] = "Bearer " + token
    req = urllib.request.Request(url + path, data=data, method=method, headers=headers)
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read() or b"{}")


def parse_time(text):
    """RFC 3339 with microseconds and Z, as stokerd writes it."""
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=timezone.utc).timestamp()


def run_stoker(url, token, jobs, threads, timeout):
    def submit_one(_):
        t = time.time()
        job = stoker_call(url, token, "POST", PATH, JOB)
        return t, job["name"].rsplit("/", 1)[1]

    got = fan_out(jobs, threads, submit_one)
    ids = {job_id for _, job_id in got}
    # Wait for the end with one listing per round (pages of 1000, the most the
    # API gives; cheap for the daemon on a small machine); the times come
    # from the events, not from this poll.
    deadline = time.monotonic() + timeout
    while True:
        done, token_arg = 0, ""
        while True:
            page = stoker_call(url, token, "GET", PATH + "?pageSize=1000" + token_arg)
            done += sum(1 for j in page.get("customJobs", [])
                        if j["name"].rsplit("/", 1)[1] in ids and j["state"] in TERMINAL)
            if not page.get("nextPageToken"):
                break
            token_arg = "&pageToken=" + page["nextPageToken"]
        if done == len(ids):
            break
        if time.monotonic() > deadline:
            raise SystemExit("stoker: %d of %d jobs ended after %ds" % (done, len(ids), timeout))
        time.sleep(0.25)

    submits, placed, ended, states = [], [], [], {}
    for t_submit, job_id in got:
        events = stoker_call(url, token, "GET", PATH + "/" + job_id + "/events")["events"]
        t_placed = next((parse_time(e["time"]) for e in events
                         if e["to"] == "JOB_STATE_PENDING"), None)
        end = next((e for e in events if e["to"] in TERMINAL), None)
        if t_placed is None or end is None:
            raise SystemExit("stoker: job %s has no PENDING or end event: %s" % (job_id, events))
        submits.append(t_submit)
        placed.append(t_placed)
        ended.append(parse_time(end["time"]))
        states[end["to"]] = states.get(end["to"], 0) + 1
    return summarize("stoker", submits, placed, ended, states)


# --- Slurm ----------------------------------------------------------------

def run_slurm(jobs, threads, poll_ms, timeout):
    name = "placebench-%d" % int(time.time())
    lock = threading.Lock()
    known = {}  # job id -> submit time, once sbatch has answered
    start, end = {}, {}
    stop = threading.Event()

    def poll():
        while not stop.is_set():
            with lock:
                watching = [j for j in known if j not in end]
            out = subprocess.run(["squeue", "-h", "-n", name, "-o", "%i %T"],
                                 capture_output=True, text=True)
            now = time.time()
            if out.returncode == 0:
                seen = dict(line.split() for line in out.stdout.splitlines() if line.strip())
                with lock:
                    for j in watching:
                        state = seen.get(j)
                        if state is None:
                            start.setdefault(j, now)
                            end[j] = now
                        elif state not in ("PENDING", "CONFIGURING") and j not in start:
                            start[j] = now
            stop.wait(poll_ms / 1000)

    poller = threading.Thread(target=poll)

    def submit_one(_):
        t = time.time()
        out = subprocess.run(["sbatch", "--parsable", "-J", name, "-n1", "-c1", "--mem=100M",
                              "--wrap", "true", "-o", "/dev/null"],
                             capture_output=True, text=True, check=True)
        job_id = out.stdout.strip().split(";")[0]
        with lock:
            known[job_id] = t
        return t, job_id

    poller.start()
    try:
        got = fan_out(jobs, threads, submit_one)
        deadline = time.monotonic() + timeout
        while True:
            with lock:
                done = len(end)
            if done == len(got):
                break
            if time.monotonic() > deadline:
                raise SystemExit("slurm: %d of %d jobs left the queue after %ds" %
                                 (done, len(got), timeout))
            time.sleep(0.1)
    finally:
        stop.set()
        poller.join()
        if len(end) < len(known):
            subprocess.run(["scancel", "-n", name], check=False)
    submits = [t for t, _ in got]
    placed = [start[j] for _, j in got]
    ended = [end[j] for _, j in got]
    return summarize("slurm", submits, placed, ended, {"left the queue": len(got)})


# --- Report ---------------------------------------------------------------

ROWS = [
    ("submit all jobs, s", "submit_s", "%.2f"),
    ("first submit → last job ended, s", "wall_s", "%.2f"),
    ("jobs/s end to end", "jobs_per_s", "%.1f"),
    ("first submit → last placed/started, s", "place_wall_s", "%.2f"),
    ("placements/s", "placements_per_s", "%.1f"),
    ("submit → placed/started p50, ms", "latency_p50_ms", "%.0f"),
    ("submit → placed/started p99, ms", "latency_p99_ms", "%.0f"),
    ("submit → placed/started max, ms", "latency_max_ms", "%.0f"),
]


def table(results):
    names = [r["side"] for r in results]
    both = len(results) == 2
    head = "| %d jobs | %s |%s" % (results[0]["jobs"], " | ".join(
        {"stoker": "Stoker", "slurm": "Slurm"}[n] for n in names), " Stoker/Slurm |" if both else "")
    lines = [head, "|---|" + "---:|" * (len(results) + (1 if both else 0))]
    for label, key, fmt in ROWS:
        cells = [fmt % r[key] for r in results]
        if both:
            a, b = results[0][key], results[1][key]
            cells.append("%.2f×" % (a / b) if b else "–")
        lines.append("| %s | %s |" % (label, " | ".join(cells)))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", help="a running stokerd (leave out to skip Stoker)")
    ap.add_argument("--token-file", help="the daemon's token file (DATA/token)")
    ap.add_argument("--slurm", action="store_true", help="also run the Slurm side")
    ap.add_argument("--jobs", type=int, default=300)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--poll-ms", type=int, default=50)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per side")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not args.url and not args.slurm:
        ap.error("nothing to run: give --url and/or --slurm")
    results = []
    if args.url:
        token = open(args.token_file).read().strip() if args.token_file else ""
        print("stoker: %d jobs from %d threads" % (args.jobs, args.threads), file=sys.stderr)
        results.append(run_stoker(args.url, token, args.jobs, args.threads, args.timeout))
        print("stoker: states %s" % results[-1]["states"], file=sys.stderr)
    if args.slurm:
        print("slurm: %d jobs from %d threads, squeue every %d ms" %
              (args.jobs, args.threads, args.poll_ms), file=sys.stderr)
        results.append(run_slurm(args.jobs, args.threads, args.poll_ms, args.timeout))
    if args.json:
        for r in results:
            print(json.dumps(r))
    print(table(results))
    ok = all(r["states"].get("JOB_STATE_SUCCEEDED", r["jobs"]) == r["jobs"] for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
