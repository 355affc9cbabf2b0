#!/usr/bin/python3
"""Stoker side of the trial-throughput benchmark (issue #29; run.sh runs it).

Starts a real stokerd on a fresh temp data dir, submits --studies
hyperparameterTuningJobs at once through the REST API (each: one DOUBLE
parameter x in [0, 1], MAXIMIZE score = -(x - 0.3)^2, --trials trials,
--parallel at a time, trainer: trainer.py with the hypertune helper), waits
until every study has ended, and reports trials per second end to end plus
per-trial timings taken from the API and from the trainers' own stamps.

  /usr/bin/python3 bench/trial_throughput/stoker_side.py --bin-dir build/bin \
      [--studies 30] [--trials 30] [--parallel 3] [--out stoker.json]

Every stamp is CLOCK_REALTIME (time.time() in the client and the trainer,
the daemon's RFC 3339 times with microseconds), one host, so they compare
directly. Percentiles are nearest-rank.
"""
import argparse
import concurrent.futures
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.abspath(os.path.join(HERE, "..", ".."))
IMAGE = "bench/trivial:latest"  # mapped to a local interpreter by the config's images: rule
STUDIES = "/v1/projects/p/locations/l/hyperparameterTuningJobs"
JOBS = "/v1/projects/p/locations/l/customJobs"
TERMINAL = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def pct(values, q):
    s = sorted(values)
    if not s:
        return None
    return s[min(len(s) - 1, max(0, int(round(q / 100.0 * (len(s) - 1)))))]


def summary(values):
    if not values:
        return None
    return {"n": len(values), "p50": pct(values, 50), "p90": pct(values, 90),
            "p99": pct(values, 99), "min": min(values), "max": max(values),
            "mean": sum(values) / len(values)}


def ts(rfc3339):
    """Seconds since the epoch of the daemon's '2026-11-28T03:20:07.123456Z'."""
    if not rfc3339:
        return None
    d = datetime.datetime.strptime(rfc3339, "%Y-%m-%dT%H:%M:%S.%fZ")
    return d.replace(tzinfo=datetime.timezone.utc).timestamp()


class Api:
    def __init__(self, url, token):
        self.url, self.token = url, token

    def __call__(self, method, path, body=None):
        req = urllib.request.Request(
            self.url + path, method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"authorization": "Bearer " + self.token, "content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            raise SystemExit("%s %s: HTTP %d: %s" % (method, path, e.code, e.read()[:2000]))


def config_text(args):
    lines = [
        "default_unix_user: root",       # the trainers run as the daemon's account (root here)
        "allow_root_trainers: true",
        "poll_interval_ms: %d" % args.poll_ms,
        "cpu_oversubscription: %g" % args.cpu_oversubscription,
        "cancel_grace_seconds: 1",
        "warm_starts: %s" % ("true" if args.warm else "false"),
        "containers:",
        "  engine: %s" % args.containers_engine,
        "images:",
        "  - match: \"*\"",
        "    python: %s" % args.python,
    ]
    if args.preload is not None:
        mods = [m for m in args.preload.split(",") if m]
        lines.append("warm_start_preload: [%s]" % ", ".join(mods))
    return "\n".join(lines) + "\n"


def study_body(args, trace_dir, trials, name):
    return {
        "displayName": name,
        "maxTrialCount": trials,
        "parallelTrialCount": args.parallel,
        "maxFailedTrialCount": 0,
        "studySpec": {
            "metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
            "parameters": [{"parameterId": "x",
                            "doubleValueSpec": {"minValue": 0.0, "maxValue": 1.0}}],
            "algorithm": args.algorithm,
        },
        "trialJobSpec": {"workerPoolSpecs": [{
            "machineSpec": {"machineType": args.machine}, "replicaCount": 1,
            "containerSpec": {"imageUri": IMAGE, "command": ["python3", args.trainer],
                              "env": [{"name": "TRACE_DIR", "value": trace_dir}]}}]},
    }


def cpu_seconds(pid):
    """utime + stime of process `pid` in seconds, or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(") ", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def busy_cpu_seconds():
    """Busy (non-idle, non-iowait) CPU seconds of the whole machine, all cores."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def processes_under(path):
    """Pids of processes (not this one) whose command line names `path`:
    the warm interpreter and any replica supervisor of our data dir."""
    pids = []
    needle = path.encode()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                if needle in f.read():
                    pids.append(int(d))
        except OSError:
            pass
    return pids


def stop_leftovers(data):
    pids = processes_under(data)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.time() + 10
    while time.time() < deadline and any(os.path.exists("/proc/%d" % p) for p in pids):
        time.sleep(0.1)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids


def wait_study(api, sid, deadline, poll):
    while True:
        s = api("GET", STUDIES + "/" + sid)
        if s["state"] in TERMINAL:
            return s
        if time.time() > deadline:
            raise SystemExit("timed out: study %s is %s with %d trials" % (
                sid, s["state"], len(s.get("trials", []))))
        time.sleep(poll)


def list_jobs(api):
    jobs, token = {}, ""
    while True:
        r = api("GET", JOBS + "?pageSize=1000" + ("&pageToken=" + token if token else ""))
        for j in r.get("customJobs", []):
            jobs[j["name"].rsplit("/", 1)[1]] = j
        token = r.get("nextPageToken", "")
        if not token:
            return jobs


def start_note(data, job_id):
    path = os.path.join(data, "jobs", job_id, "workerpool0-0", "trainer.json")
    try:
        with open(path) as f:
            return json.load(f).get("start_note", "")
    except (OSError, ValueError):
        return None


def run(args, tmp):
    data = os.path.join(tmp, "data")
    trace = os.path.join(tmp, "trace")
    os.makedirs(data)
    os.makedirs(trace)
    with open(os.path.join(data, "config.yaml"), "w") as f:
        f.write(config_text(args))
    log_path = os.path.join(data, "stokerd.bench.log")
    logf = open(log_path, "wb")
    proc = subprocess_popen([os.path.join(args.bin_dir, "stokerd"), "--data-dir", data,
                             "--listen", "127.0.0.1:0"], logf)
    result = {"config": {k: v for k, v in vars(args).items() if k not in ("out",)},
              "config_yaml": config_text(args), "loadavg_at_start": os.getloadavg(),
              "cpus": os.cpu_count()}
    try:
        url = None
        deadline = time.time() + 60
        while url is None:
            if proc.poll() is not None:
                raise SystemExit("stokerd exited with %s:\n%s" % (
                    proc.returncode, open(log_path, errors="replace").read()[-3000:]))
            if time.time() > deadline:
                raise SystemExit("stokerd did not answer /healthz in 60 s")
            try:
                u = open(os.path.join(data, "stokerd.addr")).read().strip()
                with urllib.request.urlopen(u + "/healthz", timeout=2):
                    url = u
            except (OSError, ValueError):
                time.sleep(0.05)
        api = Api(url, open(os.path.join(data, "token")).read().strip())
        log("stokerd up at %s (data dir %s)" % (url, data))

        if args.warmup:
            # One 1-trial study first, so the warm interpreter is up (and the
            # interpreter check cached) before the clock starts.
            t = time.time()
            sid = api("POST", STUDIES, study_body(args, trace, 1, "warmup"))["name"].rsplit("/", 1)[1]
            s = wait_study(api, sid, time.time() + 300, 0.1)
            if s["state"] != "JOB_STATE_SUCCEEDED":
                raise SystemExit("warm-up study ended %s: %s" % (s["state"], s.get("error")))
            result["warmup_s"] = time.time() - t
            for name in os.listdir(trace):
                os.unlink(os.path.join(trace, name))
            log("warm-up study done in %.2f s" % result["warmup_s"])

        bodies = [study_body(args, trace, args.trials, "tp-%d" % i) for i in range(args.studies)]
        cpu0, busy0 = cpu_seconds(proc.pid), busy_cpu_seconds()
        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(args.submit_threads) as ex:
            replies = list(ex.map(lambda b: api("POST", STUDIES, b), bodies))
        t_submitted = time.time()
        sids = [r["name"].rsplit("/", 1)[1] for r in replies]
        log("%d studies submitted in %.3f s; waiting" % (len(sids), t_submitted - t0))
        deadline = t0 + args.timeout
        studies = [wait_study(api, sid, deadline, args.poll) for sid in sids]
        t_seen = time.time()
        cpu1, busy1 = cpu_seconds(proc.pid), busy_cpu_seconds()

        jobs = list_jobs(api)
        ends = [ts(s.get("endTime")) for s in studies]
        t_end = max(e for e in ends if e is not None) if any(ends) else t_seen
        trials = [t for s in studies for t in s.get("trials", [])]
        n_trials = len(trials)
        states = {}
        for s in studies:
            states[s["state"]] = states.get(s["state"], 0) + 1
        trial_states = {}
        for t in trials:
            trial_states[t["state"]] = trial_states.get(t["state"], 0) + 1
        wall = t_end - t0
        result.update({
            "studies": len(studies), "trials": n_trials,
            "study_states": states, "trial_states": trial_states,
            "submit_s": t_submitted - t0,
            "wall_s": wall,  # first POST sent -> last study's endTime
            "client_wall_s": t_seen - t0,  # ... -> the poller saw the last one end
            "trials_per_s": n_trials / wall if wall > 0 else None,
            "stokerd_cpu_s": (cpu1 - cpu0) if cpu0 is not None and cpu1 is not None else None,
            "machine_busy_cpu_s": busy1 - busy0,
        })
        errors = [s.get("error") for s in studies if s["state"] != "JOB_STATE_SUCCEEDED"]
        if errors:
            result["study_errors"] = errors[:5]

        # Per-trial timings: the trial's job (made when the study driver
        # suggested the trial) -> the trainer's first line -> its last line
        # -> the job's endTime (metrics read, job and trial committed).
        start_lat, run_t, end_oh, turnaround, refill, first_starts = [], [], [], [], [], []
        notes = {"warm": 0, "cold": 0, "none": 0}
        cold_examples = []
        for s in studies:
            recs = []
            for t in s.get("trials", []):
                jid = t["customJob"].rsplit("/", 1)[1]
                j = jobs.get(jid, {})
                created, ended = ts(j.get("createTime")), ts(j.get("endTime"))
                tr = None
                try:
                    with open(os.path.join(trace, jid + ".json")) as f:
                        tr = json.load(f)
                except (OSError, ValueError):
                    pass
                if created is not None:
                    recs.append((created, ended))
                    if ended is not None:
                        turnaround.append(ended - created)
                if tr and created is not None:
                    start_lat.append(tr["first_line"] - created)
                    first_starts.append(tr["first_line"] - t0)
                    run_t.append(tr["last_line"] - tr["first_line"])
                    if ended is not None:
                        end_oh.append(ended - tr["last_line"])
                note = start_note(data, jid)
                if note is None or note == "":
                    notes["none"] += 1
                elif note.startswith("warm start:"):
                    notes["warm"] += 1
                else:
                    notes["cold"] += 1
                    if len(cold_examples) < 3:
                        cold_examples.append(note)
            # The study driver's refill: a trial beyond the first `parallel`
            # is made when an earlier one ends; gap = its job's createTime -
            # the last end of this study's jobs before it.
            recs.sort()
            for k, (created, _) in enumerate(recs):
                if k < args.parallel:
                    continue
                before = [e for c, e in recs[:k] if e is not None and e <= created]
                if before:
                    refill.append(created - max(before))
        result.update({
            "first_trainer_start_s": min(first_starts) if first_starts else None,
            "trial_start_latency_s": summary(start_lat),     # job created -> trainer's first line
            "trainer_run_s": summary(run_t),                  # trainer's first -> last line
            "trial_end_overhead_s": summary(end_oh),          # trainer's last line -> job endTime
            "trial_turnaround_s": summary(turnaround),        # job created -> job endTime
            "refill_gap_s": summary(refill),                  # a trial's job ends -> its successor's is made
            "start_notes": notes, "cold_start_examples": cold_examples,
        })
        return result
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except Exception:
                proc.kill()
                proc.wait()
        logf.close()
        left = stop_leftovers(data)
        if left:
            log("stopped %d leftover process(es) of the data dir (warm interpreter, supervisors): %s"
                % (len(left), left))


def subprocess_popen(argv, logf):
    return subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin-dir", default=os.environ.get("STOKER_BIN_DIR", os.path.join(SOURCE, "build", "bin")))
    p.add_argument("--studies", type=int, default=30)
    p.add_argument("--trials", type=int, default=30)
    p.add_argument("--parallel", type=int, default=3, help="parallelTrialCount of each study")
    p.add_argument("--algorithm", default="ALGORITHM_UNSPECIFIED",
                   help="studySpec.algorithm: ALGORITHM_UNSPECIFIED (Stoker's GP-BO) or RANDOM_SEARCH")
    p.add_argument("--machine", default="n1-standard-1", help="each trial's machineType")
    p.add_argument("--cpu-oversubscription", type=float, default=16)
    p.add_argument("--poll-ms", type=int, default=20, help="config poll_interval_ms")
    p.add_argument("--no-warm", dest="warm", action="store_false", help="warm_starts: false")
    p.add_argument("--preload", default=None,
                   help="warm_start_preload as a comma list ('' = nothing); default: the daemon's")
    p.add_argument("--containers-engine", default="none")
    p.add_argument("--no-warmup", dest="warmup", action="store_false",
                   help="do not run a 1-trial study before the measured ones")
    p.add_argument("--python", default="/usr/bin/python3", help="the trainers' interpreter")
    p.add_argument("--trainer", default=os.path.join(HERE, "trainer.py"))
    p.add_argument("--submit-threads", type=int, default=8)
    p.add_argument("--poll", type=float, default=0.25, help="client poll interval, s")
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--keep", action="store_true", help="keep the temp dir (data dir, traces)")
    p.add_argument("--out")
    args = p.parse_args()
    args.bin_dir = os.path.abspath(args.bin_dir)
    args.trainer = os.path.abspath(args.trainer)
    tmp = tempfile.mkdtemp(prefix="trial-throughput-")
    os.chmod(tmp, 0o755)
    try:
        result = run(args, tmp)
    finally:
        if args.keep:
            log("kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    text = json.dumps(result, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)
    ok = (result.get("study_states") == {"JOB_STATE_SUCCEEDED": args.studies}
          and result.get("trials") == args.studies * args.trials)
    if not ok:
        log("NOT every study succeeded with all its trials: %s, %s trials" % (
            result.get("study_states"), result.get("trials")))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
