"""Preemption latency and lost work (issue #20), against the real stokerd.

A one-GPU node (declared in the config; no GPU is touched). A preemptible
victim holds the GPU; a job of higher priority that needs it is submitted,
and we measure, from the job's own createTime and startTime:
  - prompt victim: a trainer that exits at once on SIGTERM (as a
    checkpointing trainer does after saving): submit -> start;
  - stubborn victim: one that ignores SIGTERM, killed after the grace:
    submit -> start minus the grace (the overhead the goal bounds, < 1 s);
  - the GPU-seconds the scheduler says each preemption loses (its event:
    the victim's GPUs x the time since its last checkpoint, here since start
    because the victims write none), against the victim's run time.
Run: STOKER_BIN_DIR=build/bin python3 bench/preemption/preempt.py [--rounds 7]
"""
import argparse
import calendar
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "e2e"))
from harness import DEFAULT_CONFIG, Daemon, container_job, wait_for  # noqa: E402

GRACE = 3


def seconds(t):
    m = re.match(r"(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)(\.\d+)?Z", t)
    return calendar.timegm(tuple(int(x) for x in m.groups()[:6])) + float(m.group(7) or 0)


class Client:
    def __init__(self, daemon):
        self.d = daemon
        self.path = "/v1/projects/p/locations/l/customJobs"

    def call(self, method, path, body=None):
        req = urllib.request.Request(self.d.url + path, method=method,
                                     data=json.dumps(body).encode() if body else None,
                                     headers={"authorization": "Bearer " + self.d.token,
                                              "content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read() or b"{}")

    def submit(self, job):
        return self.call("POST", self.path, job)["name"].rsplit("/", 1)[1]

    def job(self, i):
        return self.call("GET", self.path + "/" + i)

    def events(self, i):
        return [e["reason"] for e in self.call("GET", self.path + "/" + i + "/events")["events"]]


def gpu(job, priority, preemptible):
    job["jobSpec"]["workerPoolSpecs"][0]["machineSpec"] = {
        "machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4",
        "acceleratorCount": 1}
    job["jobSpec"]["scheduling"] = {"priority": priority}
    if preemptible:
        job["labels"] = {"stoker-preemptible": "true"}
    return job


def round_trip(c, data, victim_script, victim_runs_s, k):
    low = c.submit(gpu(container_job("victim-%d" % k, victim_script), 0, True))
    log = os.path.join(data, "jobs", low, "workerpool0-0", "output.log")
    wait_for(lambda: os.path.exists(log) and "up" in open(log).read(), 30, "the victim")
    time.sleep(victim_runs_s)
    high = c.submit(gpu(container_job("urgent-%d" % k, "echo go"), 100, False))
    done = wait_for(lambda: (lambda j: j if j["state"] == "JOB_STATE_SUCCEEDED" else None)(
        c.job(high)), 60, "the urgent job")
    waited = seconds(done["startTime"]) - seconds(done["createTime"])
    lost = [float(m.group(1)) for e in c.events(low)
            for m in [re.search(r"about ([0-9.]+) GPU-seconds", e)] if m]
    c.call("POST", c.path + "/" + low + ":cancel")
    wait_for(lambda: c.job(low)["state"] == "JOB_STATE_CANCELLED", 60, "the victim's cancel")
    return waited, lost[0] if lost else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="stoker-preempt-bench-")
    data = os.path.join(tmp, "data")
    os.makedirs(data)
    config = DEFAULT_CONFIG + """
inventory: {cpus: 8, memory_gb: 16, gpus: [{type: NVIDIA_TESLA_T4, memory_gb: 16}]}
preemption: {enabled: true, priority_margin: 10, grace_seconds: %d, min_run_seconds: 0}
""" % GRACE
    d = Daemon(data, config).start()
    c = Client(d)
    try:
        prompt, stubborn, lost = [], [], []
        for k in range(args.rounds):
            w, l = round_trip(c, data, "trap 'exit 0' TERM; echo up; while :; do sleep 0.05; done",
                              2, k)
            prompt.append(w)
            lost.append(l)
            w, _ = round_trip(c, data, "trap '' TERM; echo up; while :; do sleep 0.05; done", 1,
                              100 + k)
            stubborn.append(w - GRACE)
        q = lambda xs, p: sorted(xs)[min(len(xs) - 1, int(p * len(xs)))]
        print("rounds %d, grace %ds" % (args.rounds, GRACE))
        print("prompt victim (exits on SIGTERM): submit->start p50 %.3f s, max %.3f s" %
              (statistics.median(prompt), max(prompt)))
        print("stubborn victim (SIGKILL after grace): submit->start minus grace p50 %.3f s, "
              "max %.3f s" % (statistics.median(stubborn), max(stubborn)))
        print("GPU-seconds lost per preemption (scheduler's estimate, 1 GPU, ~2 s run, no "
              "checkpoint): p50 %.1f" % statistics.median(lost))
    finally:
        d.kill()
        os.system("pkill -f 'stoker-run.*%s' >/dev/null 2>&1" % data)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
