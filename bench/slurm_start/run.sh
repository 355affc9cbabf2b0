#!/usr/bin/env bash
# Submit-to-start latency of a trivial job through Stoker's Slurm executor,
# next to plain `sbatch` of the same trivial work in the same run (with and
# without an srun step, as Stoker's batch script has one).
#
#   bench/slurm_start/run.sh [--jobs 10] [--build-dir build] [--out DIR]
#
# Needs a running Slurm (scripts/slurm-localhost.sh) and a built stokerd,
# stoker-run. Jobs run one at a time; "start" is when the trainer (or the
# script) first runs: the trainer's start_time_us in status.json, and the
# time the sbatch script writes. Latency is measured from just before the
# HTTP submit / the sbatch call. Prints a JSON summary (median, p90, max, ms).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
jobs=10 build="$repo/build" out=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --jobs) jobs=$2; shift ;;
    --build-dir) build=$(cd "$2" && pwd); shift ;;
    --out) out=$2; shift ;;
    *) echo "run.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
sinfo -h -o %a | grep -q up || { echo "run.sh: no Slurm partition is up; run scripts/slurm-localhost.sh" >&2; exit 1; }

exec python3 - "$jobs" "$build/bin" "$out" <<'PY'
import json, os, signal, statistics, subprocess, sys, tempfile, time, urllib.request
jobs, bin_dir, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
tmp = tempfile.mkdtemp(prefix="stoker-slurm-bench-")
# A root stokerd runs trainers as nobody (docs/slurm.md), who must be able to
# enter the data dir below: the default account switch is part of what we time.
os.chmod(tmp, 0o711)

def wait(pred, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.005)
    raise SystemExit("timed out")

def summary(ms):
    ms = sorted(ms)
    return {"n": len(ms), "median_ms": round(statistics.median(ms), 1),
            "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 1), "max_ms": round(ms[-1], 1)}

def read_ns(path):
    try:
        t = open(path).read().strip()
        return int(t) if t else None
    except FileNotFoundError:
        return None

def plain_sbatch(with_srun):
    lat = []
    for i in range(jobs):
        mark = os.path.join(tmp, "plain-%d-%d" % (with_srun, i))
        body = "date +%%s%%N > %s.tmp && mv %s.tmp %s" % (mark, mark, mark)
        script = os.path.join(tmp, "plain.sbatch")
        with open(script, "w") as f:
            f.write("#!/bin/sh\n" + ("srun --ntasks=1 sh -c '%s'\n" % body if with_srun else body + "\n"))
        t0 = time.time_ns()
        subprocess.run(["sbatch", "--parsable", "--ntasks=1", "--output=/dev/null", script],
                       check=True, capture_output=True)
        lat.append((wait(lambda: read_ns(mark)) - t0) / 1e6)
    return lat

def stoker():
    data = os.path.join(tmp, "data")
    os.makedirs(data)
    with open(os.path.join(data, "config.yaml"), "w") as f:
        f.write("executor: slurm\npoll_interval_ms: 100\nimages: [{match: 'local/sh', python: /bin/sh}]\n")
    log = open(os.path.join(tmp, "stokerd.log"), "w")
    d = subprocess.Popen([os.path.join(bin_dir, "stokerd"), "--data-dir", data, "--listen", "127.0.0.1:0"],
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = wait(lambda: os.path.exists(os.path.join(data, "stokerd.addr")) and
                   open(os.path.join(data, "stokerd.addr")).read().strip())
        token_file = os.path.join(data, "token")  # the local admin's token, when auth is on
        token = open(token_file).read().strip() if os.path.exists(token_file) else ""
        lat = []
        for i in range(jobs):
            job = {"displayName": "b%d" % i, "jobSpec": {"workerPoolSpecs": [{
                "machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 1,
                "containerSpec": {"imageUri": "local/sh", "command": ["/bin/true"]}}]}}
            req = urllib.request.Request(url + "/v1/projects/p/locations/l/customJobs",
                                         data=json.dumps(job).encode(), method="POST",
                                         headers={"content-type": "application/json",
                                                  "authorization": "Bearer " + token})
            t0 = time.time_ns()
            with urllib.request.urlopen(req) as r:
                jid = json.loads(r.read())["name"].rsplit("/", 1)[1]
            status = os.path.join(data, "jobs", jid, "workerpool0-0", "status.json")
            st = wait(lambda: os.path.exists(status) and json.load(open(status)))
            lat.append((st["start_time_us"] * 1000 - t0) / 1e6)
        return lat
    finally:
        d.send_signal(signal.SIGTERM)
        d.wait()

result = {"jobs": jobs, "slurm": subprocess.run(["sinfo", "-V"], capture_output=True, text=True).stdout.strip(),
          "sbatch": summary(plain_sbatch(False)), "sbatch_srun": summary(plain_sbatch(True)),
          "stoker_slurm_executor": summary(stoker())}
print(json.dumps(result, indent=2))
if out:
    os.makedirs(out, exist_ok=True)
    json.dump(result, open(os.path.join(out, "slurm-start.json"), "w"), indent=2)
PY
