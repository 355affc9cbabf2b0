#!/usr/bin/env python3
"""Telemetry overhead (issue #15): does sampling slow training, and what does
the sampler itself cost?

1. Throughput: a CPU-bound PyTorch trainer (matmuls for a fixed time, printing
   its step count) as a Stoker job with telemetry at `--interval` seconds vs
   telemetry off, interleaved rounds on one machine; the ratio of steps.
2. Sampler CPU: `samplerCpuSeconds` over sampled seconds, per replica, with
   1 replica and with `--crowd` sleeping replicas on the machine (the sampler
   lists /proc at every sample).

    python3 bench/telemetry/overhead.py [--rounds 3] [--seconds 15] [--interval 1] [--crowd 200]

Uses build/bin (STOKER_BIN_DIR to change) and Debian's python3 with torch.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))
import harness  # noqa: E402

TRAINER = """
import time, torch
torch.set_num_threads(1)
a = torch.randn(256, 256)
steps, t0 = 0, time.time()
while time.time() - t0 < %f:
    a = torch.tanh(a @ a)
    steps += 1
print("steps", steps, flush=True)
"""


class Stoker:
    def __init__(self, telemetry_seconds, extra=""):
        self.tmp = tempfile.mkdtemp(prefix="stoker-telemetry-bench-")
        config = harness.DEFAULT_CONFIG + "telemetry_seconds: %s\n%s" % (telemetry_seconds, extra)
        self.daemon = harness.Daemon(self.tmp, config).start()
        self.base = "/v1/projects/p/locations/l/customJobs"

    def api(self, method, path, body=None):
        import urllib.request
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.daemon.url + path, data=data, method=method, headers={
            "authorization": "Bearer " + self.daemon.token, "content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read() or b"{}")

    def run(self, job):
        jid = self.api("POST", self.base, job)["name"].rsplit("/", 1)[1]
        harness.wait_for(lambda: self.api("GET", self.base + "/" + jid)["state"] in (
            "JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED"), 600, "job " + jid)
        return jid

    def log(self, jid):
        return self.api("GET", self.base + "/" + jid + "/logs?replica=workerpool0-0")["data"]

    def close(self):
        self.daemon.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)


def python_job(name, code):
    job = harness.container_job(name, "true")
    job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["command"] = ["/usr/bin/python3", "-c", code]
    return job


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--interval", type=float, default=1)
    ap.add_argument("--crowd", type=int, default=200)
    a = ap.parse_args()

    on, off = Stoker(a.interval), Stoker(0)
    steps = {"on": [], "off": []}
    sampler = []
    try:
        for r in range(a.rounds):
            for name, s in (("off", off), ("on", on)) if r % 2 else (("on", on), ("off", off)):
                jid = s.run(python_job("train-" + name, TRAINER % a.seconds))
                steps[name].append(int(re.search(r"steps (\d+)", s.log(jid)).group(1)))
                if name == "on":
                    t = s.api("GET", s.base + "/" + jid + "/telemetry")["replicas"][0]["summary"]
                    sampler.append(t["samplerCpuSeconds"] / t["sampledSeconds"])
    finally:
        on.close()
        off.close()
    ratio = statistics.median(steps["on"]) / statistics.median(steps["off"])
    print("throughput: steps with telemetry every %gs %s, without %s; median ratio on/off %.4f"
          % (a.interval, steps["on"], steps["off"], ratio))
    print("sampler CPU per replica (1 replica on the machine): %.4f%% of a core"
          % (100 * statistics.median(sampler)))

    # A crowded machine: many replicas, each with its own sampler.
    crowd = Stoker(a.interval, "inventory: {cpus: 4000, memory_gb: 4000}\n")
    try:
        ids = []
        for i in range(a.crowd):
            job = harness.container_job("sleep-%d" % i, "sleep 40", machine="e2-standard-2")
            ids.append(crowd.api("POST", crowd.base, job)["name"].rsplit("/", 1)[1])
        harness.wait_for(lambda: all(crowd.api("GET", crowd.base + "/" + j)["state"] == "JOB_STATE_RUNNING"
                                     for j in ids[-5:]), 300, "the crowd to run")
        time.sleep(10 + 2 * a.interval)
        shares = []
        for j in ids[::max(1, len(ids) // 20)]:
            rep = crowd.api("GET", crowd.base + "/" + j + "/telemetry")["replicas"][0]
            if "summary" in rep and rep["summary"]["sampledSeconds"] > 0:
                shares.append(rep["summary"]["samplerCpuSeconds"] / rep["summary"]["sampledSeconds"])
        procs = len([p for p in os.listdir("/proc") if p.isdigit()])
        print("sampler CPU per replica with %d replicas (%d processes) on the machine: median %.3f%%, "
              "max %.3f%% of a core; all samplers together %.2f cores"
              % (a.crowd, procs, 100 * statistics.median(shares), 100 * max(shares),
                 a.crowd * statistics.median(shares)))
        for j in ids:
            crowd.api("POST", crowd.base + "/" + j + ":cancel", {})
    finally:
        crowd.close()


if __name__ == "__main__":
    main()
