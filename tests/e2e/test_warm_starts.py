"""Warm starts end to end (docs/warm-starts.md, src/runner/warm_start.h,
src/python/stoker_zygote.py): study trials (and jobs labelled
stoker-warm-start: "true") fork from a warm interpreter that already
imported torch and numpy, and get exactly what a cold start gives.

Real stokerd, real stoker-run, real zygote, Debian's python3-torch."""
import json
import os
import shutil
import signal
import subprocess
import unittest

from harness import (DEFAULT_CONFIG, IMAGE, SOURCE, Daemon, StokerTestCase,
                     others_may_read, pid_alive, read_text, skip_or_fail, wait_for)


JOBS = "/v1/projects/p/locations/l/customJobs"
STUDIES = "/v1/projects/p/locations/l/hyperparameterTuningJobs"

# What a trainer can see of the interpreter it runs in, as one JSON line.
PROBE = r'''
import json, os, sys
torch_was_loaded = "torch" in sys.modules
import torch
zygote = [n for n, m in list(sys.modules.items())
          if "zygote" in n or "zygote" in str(getattr(m, "__file__", "") or "")]
print(json.dumps({
    "torch_was_loaded": torch_was_loaded,
    "cuda_initialised": torch.cuda.is_initialized(),
    "zygote_modules": zygote,
    "main_names": sorted(k for k in vars(sys.modules["__main__"]) if not k.startswith("__")),
    "pid": os.getpid(), "pgid": os.getpgid(0), "sid": os.getsid(0),
    "cwd": os.getcwd(), "argv": sys.argv, "path0": sys.path[0],
    "probe_env": os.environ.get("PROBE_ENV"),
    "replica": os.environ.get("STOKER_REPLICA"),
    "proc_environ_has_cookie": b"STOKER_REPLICA=" in open("/proc/self/environ", "rb").read(),
    "stdout_is_fresh": sys.stdout is sys.__stdout__ and sys.stdout.fileno() == 1,
}), flush=True)
print("to-stderr", file=sys.stderr, flush=True)
mode = sys.argv[1] if len(sys.argv) > 1 else ""
if mode == "raise":
    raise ValueError("boom from the trainer")
if mode == "exit3":
    sys.exit(3)
if mode == "escape":  # a descendant that leaves the group and never execs
    if os.fork() == 0:
        os.setsid()
        with open(os.path.join(os.environ["TRACE_DIR"], "escaped-%d" % os.getpid()), "w") as f:
            f.write("x")
        import time
        time.sleep(300)
        os._exit(0)
    import time
    while not [f for f in os.listdir(os.environ["TRACE_DIR"]) if f.startswith("escaped-")]:
        time.sleep(0.01)
if mode == "sleep":
    import time
    with open(os.path.join(os.environ["TRACE_DIR"], "started-%d" % os.getpid()), "w") as f:
        f.write(str(os.getppid()))
    time.sleep(float(sys.argv[2]))
'''

# What a trainer can see of its interpreter's exit: each effect leaves a file
# in OUT_DIR (the argument), and the exit status is from sys.exit("text").
EXIT_PROBE = r'''
import atexit, gzip, os, sys, threading, time
out = sys.argv[1]
def later():
    time.sleep(0.5)
    with open(os.path.join(out, "thread"), "w") as f:
        f.write("joined")
threading.Thread(target=later).start()
atexit.register(lambda: open(os.path.join(out, "atexit"), "w").write("ran"))
left_open = open(os.path.join(out, "left-open"), "w")
left_open.write("buffered, never closed")
packed = gzip.open(os.path.join(out, "packed.gz"), "wt")
packed.write("a gzip file's trailer is written when it is closed")
class Finalized:
    def __del__(self, path=os.path.join(out, "finalized"), open=open):  # globals go at exit
        with open(path, "w") as f:
            f.write("__del__ of a global")
kept = Finalized()
print("last line, unflushed", end="")
sys.exit("the trainer's own exit message")
'''

# A trial: a deterministic score from its parameters and a torch computation.
TRIAL = r'''
import argparse, os, random
import numpy, torch
import hypertune
p = argparse.ArgumentParser()
p.add_argument("--n", type=int, required=True)
p.add_argument("--opt", required=True)
a = p.parse_args()
torch.manual_seed(a.n)
w = torch.nn.Linear(4, 1)
x = torch.ones(8, 4) * (2.0 if a.opt == "b" else 1.0)
score = float(w(x).sum()) + a.n
with open(os.path.join(os.environ["TRACE_DIR"], "trial-%s-%d" % (os.environ["CLOUD_ML_TRIAL_ID"],
                                                               os.getpid())), "w") as f:
    f.write("%r %r %r" % (score, random.random(), float(numpy.random.random())))
hypertune.HyperTune().report_hyperparameter_tuning_metric("score", score, global_step=1)
'''

WARM_CONFIG = DEFAULT_CONFIG + "warm_start_idle_seconds: 120\n"


def zygotes_of(data_dir):
    """Pids of the warm interpreters serving the daemon on `data_dir`."""
    r = subprocess.run(["pgrep", "-f", "stoker_zygote.py --socket " + data_dir], capture_output=True,
                       text=True)
    return [int(p) for p in r.stdout.split()]


class WarmStartCase(StokerTestCase):
    config = WARM_CONFIG

    def setUp(self):
        if subprocess.run(["/usr/bin/python3", "-c", "import torch"]).returncode != 0:
            skip_or_fail(self, "Debian's python3-torch is needed (scripts/install-deps.sh --test)")
        super().setUp()
        self.trace = os.path.join(self.tmp, "trace")
        os.makedirs(self.trace)
        os.chmod(self.trace, 0o777)
        self.probe = self.write("probe.py", PROBE)
        os.makedirs(os.path.join(self.tmp, "pkg"))
        self.write("pkg/probemod.py", PROBE)

    def python_job(self, args, label="true", timeout=None, env=None):
        pool = {
            "machineSpec": {"machineType": "e2-standard-2"},
            "replicaCount": 1,
            "containerSpec": {"imageUri": IMAGE, "command": ["python3"] + args,
                              "env": [{"name": "TRACE_DIR", "value": self.trace},
                                      {"name": "PROBE_ENV", "value": "from-the-job"}] +
                                     [{"name": k, "value": v} for k, v in (env or {}).items()]},
        }
        job = {"displayName": "warm", "jobSpec": {"workerPoolSpecs": [pool]}}
        if label is not None:
            job["labels"] = {"stoker-warm-start": label}
        if timeout:
            job["jobSpec"]["scheduling"] = {"timeout": timeout}
        return job

    def events(self, job_id):
        return [e["reason"] for e in self.api("GET", JOBS + "/" + job_id + "/events")[1]["events"]]

    def start_notes(self, job_id):
        return [e for e in self.events(job_id) if "warm start:" in e or "cold start:" in e]

    def wait_note(self, job_id):
        return wait_for(lambda: self.start_notes(job_id), 30, "job %s's start note" % job_id)

    def log(self, job_id):
        return read_text(os.path.join(self.replica_dir(job_id), "output.log"))

    def probe_of(self, job_id):
        line = next(l for l in self.log(job_id).splitlines() if l.startswith("{"))
        return json.loads(line)


class WarmTrainerTest(WarmStartCase):

    def test_a_warm_trainer_gets_a_fresh_interpreter_of_its_own(self):
        a = self.submit(self.python_job([self.probe, "arg1"]))
        self.assertEqual(self.wait_state(a, timeout=120)["state"], "JOB_STATE_SUCCEEDED", self.log(a))
        b = self.submit(self.python_job(["-m", "probemod", "x"],
                                        env={"PYTHONPATH": os.path.join(self.tmp, "pkg")}))
        self.assertEqual(self.wait_state(b, timeout=60)["state"], "JOB_STATE_SUCCEEDED", self.log(b))
        for job, argv0, path0 in ((a, self.probe, self.tmp),
                                  (b, os.path.join(self.tmp, "pkg", "probemod.py"),
                                   os.path.join(self.replica_dir(b), "work"))):
            notes = self.start_notes(job)
            self.assertEqual(len(notes), 1, notes)
            self.assertIn("attempt 1: warm start: forked from the warm interpreter (torch, numpy "
                          "preloaded) in ", notes[0])
            p = self.probe_of(job)
            self.assertTrue(p["torch_was_loaded"], p)  # it really was warm
            self.assertFalse(p["cuda_initialised"])
            self.assertEqual(p["zygote_modules"], [])
            self.assertEqual(p["main_names"], ["json", "os", "sys", "torch", "torch_was_loaded", "zygote"])
            self.assertEqual(p["pgid"], p["pid"])
            self.assertEqual(p["sid"], p["pid"])
            self.assertEqual(p["cwd"], os.path.join(self.replica_dir(job), "work"))
            self.assertEqual(p["argv"][0], argv0)
            self.assertEqual(p["path0"], path0)
            self.assertEqual(p["probe_env"], "from-the-job")
            self.assertEqual(p["replica"], self.replica_dir(job))
            self.assertTrue(p["proc_environ_has_cookie"])
            self.assertTrue(p["stdout_is_fresh"])
            self.assertIn("to-stderr", self.log(job))
            trainer = json.loads(read_text(os.path.join(self.replica_dir(job), "trainer.json")))
            self.assertEqual(trainer["pid"], p["pid"])
        self.assertEqual(self.probe_of(a)["argv"][1:], ["arg1"])
        self.assertEqual(self.probe_of(b)["argv"][1:], ["x"])
        # One zygote served both.
        self.assertEqual(len(zygotes_of(self.data)), 1)

    def test_exit_codes_and_tracebacks_are_those_of_a_cold_run(self):
        raised = self.submit(self.python_job([self.probe, "raise"]))
        exited = self.submit(self.python_job([self.probe, "exit3"]))
        for job, code in ((raised, 1), (exited, 3)):
            final = self.wait_state(job, timeout=120)
            self.assertEqual(final["state"], "JOB_STATE_FAILED")
            self.assertIn("non-zero status of %d" % code, json.dumps(final["error"]))
            self.assertIn("warm start:", self.wait_note(job)[0])
        cold = subprocess.run(["/usr/bin/python3", self.probe, "raise"], capture_output=True,
                              text=True, cwd=self.tmp)
        cold_tb = cold.stderr[cold.stderr.index("Traceback"):]
        log = self.log(raised)
        self.assertIn(cold_tb, log)
        self.assertNotIn("stoker_zygote", log)

    def test_a_warm_trainers_exit_does_what_a_cold_ones_does(self):
        # The warm child skips the preloaded modules' teardown (it ends in
        # os._exit): threads, atexit, open files, __del__ of its globals and
        # the exit status must still be those of a cold run.
        script = self.write("exit_probe.py", EXIT_PROBE)
        cold_dir, warm_dir = os.path.join(self.trace, "cold"), os.path.join(self.trace, "warm")
        for d in (cold_dir, warm_dir):
            os.makedirs(d)
            os.chmod(d, 0o777)
        cold = subprocess.run(["/usr/bin/python3", script, cold_dir], capture_output=True, text=True)
        self.assertEqual(cold.returncode, 1, cold.stderr)
        job = self.submit(self.python_job([script, warm_dir]))
        final = self.wait_state(job, timeout=120)
        self.assertIn("warm start:", self.wait_note(job)[0])
        self.assertEqual(final["state"], "JOB_STATE_FAILED")
        self.assertIn("non-zero status of 1", json.dumps(final["error"]))
        log = self.log(job)
        self.assertIn("last line, unflushed", log)
        self.assertIn("the trainer's own exit message", log)
        self.assertEqual(cold.stdout, "last line, unflushed")
        self.assertIn("the trainer's own exit message", cold.stderr)
        import gzip
        seen = {}
        for d in (cold_dir, warm_dir):
            seen[d] = {name: (gzip.open(os.path.join(d, name), "rt").read() if name.endswith(".gz")
                              else read_text(os.path.join(d, name)))
                       for name in sorted(os.listdir(d))}
        self.assertEqual(sorted(seen[cold_dir]), ["atexit", "finalized", "left-open", "packed.gz",
                                                  "thread"])
        self.assertEqual(seen[warm_dir], seen[cold_dir])

    def test_cancel_and_timeout_stop_a_warm_trainer(self):
        cancelled = self.submit(self.python_job([self.probe, "sleep", "300"]))
        timed = self.submit(self.python_job([self.probe, "sleep", "300"], timeout="3s"))
        started = wait_for(lambda: (lambda f: f if len(f) == 2 else None)(
            [f for f in os.listdir(self.trace) if f.startswith("started-")]), 120, "both trainers")
        pids = [int(f.split("-")[1]) for f in started]
        # The sampler follows the warm trainer (the zygote's child, not the
        # supervisor's): its process and memory are in the telemetry.
        telemetry = os.path.join(self.replica_dir(cancelled), "telemetry.jsonl")
        point = wait_for(lambda: next((p for p in (json.loads(l) for l in (
            read_text(telemetry).splitlines() if os.path.exists(telemetry) else []))
            if p.get("processes", 0) >= 1), None), 30, "a telemetry point of the warm trainer")
        self.assertGreater(point["rssBytes"], 50 << 20, point)  # torch is in its memory
        self.stoker("jobs", "cancel", cancelled)
        self.assertEqual(self.wait_state(cancelled)["state"], "JOB_STATE_CANCELLED")
        final = self.wait_state(timed, timeout=60)
        self.assertEqual(final["state"], "JOB_STATE_FAILED")
        self.assertIn("timed out", json.dumps(final["error"]))
        for pid in pids:
            wait_for(lambda: not pid_alive(pid), 10, "trainer %d to be gone" % pid)
        for job in (cancelled, timed):
            self.assertIn("warm start:", self.wait_note(job)[0])

    def test_a_descendant_that_escaped_the_group_dies_with_the_replica(self):
        job = self.submit(self.python_job([self.probe, "escape"]))
        self.assertEqual(self.wait_state(job, timeout=120)["state"], "JOB_STATE_SUCCEEDED",
                         self.log(job))
        self.assertIn("warm start:", self.wait_note(job)[0])
        escaped = [f for f in os.listdir(self.trace) if f.startswith("escaped-")]
        self.assertEqual(len(escaped), 1)
        pid = int(escaped[0].split("-")[1])
        # Found by the STOKER_REPLICA cookie it inherited (the warm trainer
        # shows its own environment in /proc), as for a cold trainer's.
        self.assertFalse(pid_alive(pid), "the escaped process %d outlived its replica" % pid)

    def test_a_killed_supervisor_takes_its_warm_trainer_along(self):
        job = self.submit(self.python_job([self.probe, "sleep", "300"]))
        started = wait_for(lambda: [f for f in os.listdir(self.trace) if f.startswith("started-")],
                           120, "the trainer")
        trainer = int(started[0].split("-")[1])
        zygote = int(read_text(os.path.join(self.trace, started[0])))
        supervisor = json.loads(read_text(os.path.join(self.replica_dir(job), "runner.json")))["pid"]
        os.kill(supervisor, signal.SIGKILL)
        wait_for(lambda: not pid_alive(trainer), 10, "the trainer to die with its supervisor")
        wait_for(lambda: "died without reporting" in json.dumps(self.events(job)), 30,
                 "the replica to be found lost")
        self.stoker("jobs", "cancel", job)
        self.wait_state(job, timeout=30)
        # The zygote serves on: the next trainer is its child.
        for f in os.listdir(self.trace):
            os.unlink(os.path.join(self.trace, f))
        after = self.submit(self.python_job([self.probe, "sleep", "0"]))
        self.assertEqual(self.wait_state(after, timeout=60)["state"], "JOB_STATE_SUCCEEDED",
                         self.log(after))
        again = [f for f in os.listdir(self.trace) if f.startswith("started-")]
        self.assertEqual(int(read_text(os.path.join(self.trace, again[0]))), zygote)
        self.assertTrue(pid_alive(zygote))

    def test_what_cannot_run_warm_starts_cold_and_says_why(self):
        flags = self.submit(self.python_job(["-X", "importtime", self.probe]))
        home = self.submit(self.python_job([self.probe], env={"PYTHONHOME": "/usr"}))
        opted_out = self.submit(self.python_job([self.probe], label="false"))
        plain = self.submit(self.python_job([self.probe], label=None))
        for job in (flags, home, opted_out, plain):
            self.assertEqual(self.wait_state(job, timeout=120)["state"], "JOB_STATE_SUCCEEDED",
                             self.log(job))
        self.assertIn("cold start: the interpreter option '-X'", self.wait_note(flags)[0])
        self.assertIn("cold start: PYTHONHOME is set", self.wait_note(home)[0])
        self.assertFalse(self.probe_of(flags)["torch_was_loaded"])
        # Not asked for: a cold start, and nothing said.
        for job in (opted_out, plain):
            self.assertEqual(self.start_notes(job), [])
            self.assertFalse(self.probe_of(job)["torch_was_loaded"])

    def test_a_dead_zygote_is_replaced_and_no_replica_starts_twice(self):
        first = self.submit(self.python_job([self.probe, "sleep", "300"]))
        started = wait_for(lambda: [f for f in os.listdir(self.trace) if f.startswith("started-")],
                           120, "the first trainer")
        trainer_pid = int(started[0].split("-")[1])
        zygote = int(read_text(os.path.join(self.trace, started[0])))
        self.assertEqual(zygotes_of(self.data), [zygote])
        os.kill(zygote, signal.SIGKILL)
        # Its trainer dies with it, and says so honestly.
        final = self.wait_state(first, timeout=60)
        self.assertEqual(final["state"], "JOB_STATE_FAILED")
        self.assertIn("signal 9", json.dumps(final["error"]))
        self.assertIn("the warm interpreter (pid %d) died" % zygote, self.log(first))
        self.assertFalse(pid_alive(trainer_pid))
        # The next trial starts warm from a new zygote, once.
        second = self.submit(self.python_job([self.probe, "sleep", "0"]))
        self.assertEqual(self.wait_state(second, timeout=120)["state"], "JOB_STATE_SUCCEEDED",
                         self.log(second))
        self.assertIn("warm start:", self.wait_note(second)[0])
        new = zygotes_of(self.data)
        self.assertEqual(len(new), 1)
        self.assertNotEqual(new[0], zygote)
        self.assertEqual(len([f for f in os.listdir(self.trace) if f.startswith("started-")]), 2)
        self.assertEqual(self.log(second).count('"torch_was_loaded": true'), 1)

    def test_warm_trainers_outlive_a_killed_daemon_and_finish_once(self):
        jobs = [self.submit(self.python_job([self.probe, "sleep", "4"])) for _ in range(3)]
        wait_for(lambda: len([f for f in os.listdir(self.trace) if f.startswith("started-")]) == 3,
                 120, "three warm trainers")
        self.daemon.kill(signal.SIGKILL)
        self.daemon = Daemon(self.data, self.config).start()
        for job in jobs:
            self.assertEqual(self.wait_state(job, timeout=60)["state"], "JOB_STATE_SUCCEEDED",
                             self.log(job))
            self.assertIn("warm start:", self.wait_note(job)[0])
            self.assertEqual(self.log(job).count('"torch_was_loaded": true'), 1)
        self.assertEqual(len([f for f in os.listdir(self.trace) if f.startswith("started-")]), 3)


class WarmPreloadTest(WarmStartCase):
    config = WARM_CONFIG + "warm_start_preload: [numpy, no_such_module_here]\n"

    def test_a_preload_that_cannot_be_imported_is_left_out_and_said(self):
        job = self.submit(self.python_job([self.probe]))
        self.assertEqual(self.wait_state(job, timeout=120)["state"], "JOB_STATE_SUCCEEDED",
                         self.log(job))
        note = self.wait_note(job)[0]
        self.assertIn("warm start: forked from the warm interpreter (numpy preloaded; not "
                      "no_such_module_here: ModuleNotFoundError", note)
        self.assertFalse(self.probe_of(job)["torch_was_loaded"])  # not in this preload


class WarmStudyTest(WarmStartCase):

    def run_study(self, daemon_url_api):
        body = {
            "displayName": "warm-vs-cold", "maxTrialCount": 6, "parallelTrialCount": 3,
            "studySpec": {
                "metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
                "parameters": [
                    {"parameterId": "n", "integerValueSpec": {"minValue": 1, "maxValue": 3}},
                    {"parameterId": "opt", "categoricalValueSpec": {"values": ["a", "b"]}}],
                "algorithm": "GRID_SEARCH",
            },
            "trialJobSpec": {"workerPoolSpecs": [{
                "machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 1,
                "containerSpec": {"imageUri": IMAGE, "command": ["python3", self.trial],
                                  "env": [{"name": "TRACE_DIR", "value": self.trace}]}}]},
        }
        status, reply = daemon_url_api("POST", STUDIES, body)
        self.assertEqual(status, 200, reply)
        sid = reply["name"].rsplit("/", 1)[1]
        study = wait_for(lambda: (lambda s: s if s["state"] in (
            "JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED") else None)(
                daemon_url_api("GET", STUDIES + "/" + sid)[1]), 240, "study %s" % sid)
        self.assertEqual(study["state"], "JOB_STATE_SUCCEEDED", study.get("error"))
        results = {}
        for t in study["trials"]:
            params = tuple(sorted((p["parameterId"], str(p["value"])) for p in t["parameters"]))
            results[params] = t["finalMeasurement"]["metrics"][0]["value"]
        return study, results

    def test_a_study_gives_the_same_results_warm_and_cold(self):
        self.trial = self.write("trial.py", TRIAL)
        warm_study, warm = self.run_study(self.api)
        self.assertEqual(len(warm), 6)
        for t in warm_study["trials"]:
            job = t["customJob"].rsplit("/", 1)[1]
            notes = self.start_notes(job)
            self.assertEqual(len(notes), 1, notes)
            self.assertIn("warm start:", notes[0])
        # Three trials started together made one zygote (the lock).
        self.assertEqual(len(zygotes_of(self.data)), 1)
        warm_traces = sorted(os.listdir(self.trace))
        # Each trial's own random state: no two trials drew the same numbers.
        draws = [read_text(os.path.join(self.trace, f)).split(" ", 1)[1] for f in warm_traces]
        self.assertEqual(len(set(draws)), len(draws))

        # The same study on a daemon with warm starts off.
        self.daemon.kill(signal.SIGTERM)
        self.data = os.path.join(self.tmp, "cold-data")
        os.makedirs(self.data)
        self.daemon = Daemon(self.data, WARM_CONFIG + "warm_starts: false\n").start()
        cold_study, cold = self.run_study(self.api)
        self.assertEqual(cold, warm)
        for t in cold_study["trials"]:
            self.assertEqual(self.start_notes(t["customJob"].rsplit("/", 1)[1]), [])
        self.assertEqual(zygotes_of(self.data), [])


ISOLATED_CONFIG = WARM_CONFIG.replace(
    "default_unix_user: root\nallow_root_trainers: true\n", "") + "job_isolation: required\n"

ATTACK = r'''
import os, sys
import torch
data = sys.argv[1]
for what, fn in (("READ-TOKEN", lambda: open(os.path.join(data, "token")).read()),
                 ("READ-DB", lambda: open(os.path.join(data, "stoker.db"), "rb").read(16)),
                 ("LISTED-DATA", lambda: os.listdir(data)),
                 ("LISTED-WARM", lambda: os.listdir(os.path.join(data, "warm"))),
                 ("LISTED-JOBS", lambda: os.listdir(os.path.join(data, "jobs")))):
    try:
        fn()
        print("MARK-" + what, flush=True)
    except OSError as e:
        print("refused", what, e.errno, flush=True)
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
if libc.umount2(data.encode(), 2) == 0:  # MNT_DETACH: would show what isolation hides
    print("MARK-UNMOUNTED", os.listdir(data), flush=True)
else:
    print("refused umount", ctypes.get_errno(), flush=True)
print("CapEff", [l for l in open("/proc/self/status") if l.startswith("CapEff")], flush=True)
print("uid", os.getuid(), "euid", os.geteuid(), flush=True)
print("OK-RAN", flush=True)
'''


class NobodyWarmCase(WarmStartCase):
    """A root daemon whose trainers run as nobody: the test's directories
    are made enterable by it."""

    def setUp(self):
        helpers = os.path.join(SOURCE, "src", "python")
        if os.geteuid() != 0 or not others_may_read(helpers):
            skip_or_fail(self, "needs a root daemon whose trainers (nobody) can read " + helpers)
        super().setUp()
        os.chmod(self.tmp, 0o711)
        os.chmod(self.data, 0o711)
        os.chmod(os.path.join(self.tmp, "pkg"), 0o755)


class WarmIsolationTest(NobodyWarmCase):
    """A warm trainer is exactly as isolated as a cold one (test_isolation)."""

    config = ISOLATED_CONFIG

    def setUp(self):
        super().setUp()
        log = read_text(os.path.join(self.data, "stokerd.test.log"))
        if "cannot isolate trainers on this machine" in log:
            skip_or_fail(self, "this machine cannot isolate trainers")

    def test_a_warm_trainer_cannot_read_the_daemons_data_dir(self):
        attack = self.write("attack.py", ATTACK)
        os.chmod(attack, 0o644)
        for label in ("true", "false"):
            job = self.submit(self.python_job([attack, self.data], label=label))
            final = self.wait_state(job, timeout=120)
            log = self.log(job)
            self.assertEqual(final["state"], "JOB_STATE_SUCCEEDED", log)
            self.assertIn("OK-RAN", log)
            self.assertNotIn("MARK-", log)
            self.assertIn("uid 65534 euid 65534", log)
            if label == "true":
                self.assertIn("warm start:", self.wait_note(job)[0])



@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root and setpriv to start stokerd as nobody")
class WarmNonRootIsolationTest(WarmIsolationTest):
    """A daemon that is not root: the zygote runs as its account (nobody),
    and the warm trainer joins the user namespace stoker-run made, where it
    must keep no capability (an exec would have dropped them)."""

    config = ISOLATED_CONFIG

    def setUp(self):
        from test_isolation import start_as_nobody
        if subprocess.run(["/usr/bin/python3", "-c", "import torch"]).returncode != 0:
            skip_or_fail(self, "Debian's python3-torch is needed (scripts/install-deps.sh --test)")
        start_as_nobody(self)
        self.trace = os.path.join(self.tmp, "trace")
        os.makedirs(self.trace)
        os.chmod(self.trace, 0o777)
        log = read_text(os.path.join(self.data, "stokerd.test.log"))
        if "cannot isolate trainers on this machine" in log:
            skip_or_fail(self, "this machine cannot isolate trainers")


if __name__ == "__main__":
    unittest.main()
