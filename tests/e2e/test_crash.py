"""Crash test (issue #7): a stream of jobs and studies while stokerd, replica
supervisors and trainers are SIGKILLed at random moments. The control plane
must never lose a job, never run a trainer twice, never leave a job stuck or a
replica process behind, and every job must end in the state that matches what
happened to it.

stokerd dies (SIGKILL, then a restart) in one of five modes: during a
submission, while the control loop launches a batch, while a cancel is on
its way, when idle, or at a replica's exit: trainers held on a gate file are
released together and stokerd is killed 0-30 ms later, inside the window
where trainers exit, supervisors write status.json and the control loop
commits the end.

Short form (CI): `python3 -m unittest test_crash` (about 45 s of faults;
STOKER_CRASH_SEED=N replays a seed).
Long form: `python3 tests/e2e/test_crash.py --minutes 20 [--seed N]`, which is
what bench/crash/run.sh runs: the same code with bigger numbers.

A run is driven by one seeded RNG (the seed is printed): every decision (what
to submit, which job gets which fault, when stokerd dies) comes from it, so a
failing run replays the same plan with --seed. Timing still varies, as it
must with real processes.

Client-side history:
- `plans`: displayName -> what the test meant for the job (exit code, or the
  fault it gets: cancel, kill-trainer, kill-supervisor) and what it did.
- `acked`: job ids the API acknowledged (200 to the submission).
- the start file: each trainer appends `start JOB PID` when it starts and
  `end JOB PID` when it ends, so a second run of any trainer is visible;
  the trainers of kill-supervisor jobs also start a grandchild that calls
  setsid() and appends `proc JOB PID`.

Checks: every acknowledged job and study exists after every restart; each
job's events hold exactly one transition into a terminal state, form one
chain (each `from` is the previous `to`), end in the job's state and give
the reason that matches the history (exit 0: SUCCEEDED; exit 3: FAILED, "non-zero
status of 3"; trainer SIGKILLed: FAILED, "SIGKILL"; stoker-run SIGKILLed:
FAILED, "supervisor (stoker-run) died"; cancelled: CANCELLED); as soon as a
job is seen terminal, none of the processes it recorded is alive (checked
through the run, not only at the end); no trainer started twice; logs hold
the last line; nothing of the run is left at the end.
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import unittest
import urllib.error
import urllib.request

from harness import IMAGE, Daemon, StokerTestCase, pid_alive, read_text, wait_for

TERMINAL = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")
JOBS = "/v1/projects/p/locations/l/customJobs"
STUDIES = "/v1/projects/p/locations/l/hyperparameterTuningJobs"
LAST_LINE = "stoker-last-line"
# When stokerd is killed (see kill_daemon).
KILL_MODES = ["submit", "launch", "exit", "cancel", "idle"]

# A job that ends on its own after a short nap (or, in "exit" mode, once its
# gate file exists) with the planned exit code.
NATURAL = ('echo "start $CLOUD_ML_JOB_ID $$" >> "$CRASH_STARTS"; echo working; {wait}; '
           'echo "%s $CLOUD_ML_JOB_ID"; echo "end $CLOUD_ML_JOB_ID $$" >> "$CRASH_STARTS"; '
           'exit {code}' % LAST_LINE)
GATE_WAIT = 'while [ ! -e "{gate}" ]; do sleep 0.01; done'
# The kill-supervisor job's trainer starts a grandchild that leaves its
# process group and session (setsid): it must still die with its job.
ESCAPE = ('setsid sh -c \'echo "proc $CLOUD_ML_JOB_ID $$" >> "$CRASH_STARTS"; exec sleep 900\' '
          '</dev/null >/dev/null 2>&1 & ')
# A job that waits for the test's fault (cancel or a kill); should the test
# forget it, it ends by itself with a code no check accepts.
TARGET = ('echo "start $CLOUD_ML_JOB_ID $$" >> "$CRASH_STARTS"; echo waiting; i=0; '
          'while [ $i -lt 900 ]; do sleep 1; i=$((i+1)); done; exit 99')
TRIAL = r'''
import os, sys, time
import hypertune
starts, job = os.environ["CRASH_STARTS"], os.environ["CLOUD_ML_JOB_ID"]
with open(starts, "a") as f:
    f.write("start %s %d\n" % (job, os.getpid()))
x = float(sys.argv[1].split("=")[1])
time.sleep(0.3)
hypertune.HyperTune().report_hyperparameter_tuning_metric("score", -(x - 0.5) ** 2, global_step=1)
print("''' + LAST_LINE + r''' " + job, flush=True)
with open(starts, "a") as f:
    f.write("end %s %d\n" % (job, os.getpid()))
'''


class Chaos:
    """One crash run against the daemon of a StokerTestCase."""

    def __init__(self, case, seed, seconds, max_targets=5, study_every=12.0):
        self.case = case
        self.rng = random.Random(seed)
        self.seed = seed
        self.seconds = seconds
        self.max_targets = max_targets
        self.study_every = study_every
        self.token = "crash-%d-%d" % (os.getpid(), seed)
        self.starts = os.path.join(case.tmp, "starts")
        self.trainer = case.write("trial.py", TRIAL)
        open(self.starts, "w").close()
        self.plans = {}  # displayName -> plan dict
        self.by_id = {}  # job id -> displayName (acked, or found after a lost reply)
        self.acked = set()
        self.studies = {}  # study id -> maxTrialCount
        self.counts = dict(jobs=0, studies=0, daemon_kills=0, supervisor_kills=0, trainer_kills=0,
                           cancels=0, exit_kills=0, exit_held_trainers=0, unacked_submissions=0,
                           restarts_checked=0, end_checks=0, escaped_grandchildren_checked=0,
                           events_checked=0)
        self.kill_modes = {}  # mode -> daemon kills in it
        self.first_modes = self.rng.sample(KILL_MODES, len(KILL_MODES))
        self.end_checked = set()  # job ids whose processes were checked at their end
        self.violations = []
        self.seq = 0

    # ---- plumbing -----------------------------------------------------------

    def log(self, msg):
        print("[crash] " + msg, file=sys.stderr, flush=True)

    def violation(self, msg):
        self.violations.append(msg)
        self.log("VIOLATION: " + msg)

    def call(self, method, path, body=None, timeout=30):
        """(status, body) from the API, or (None, error) when no answer came."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"content-type": "application/json",
                   "authorization": "Bearer " + self.case.daemon.token}
        req = urllib.request.Request(self.case.daemon.url + path, data=data, method=method,
                                     headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")
        except (OSError, ValueError) as e:  # refused, reset, truncated reply
            return None, str(e)

    def env(self):
        return [{"name": "CRASH_STARTS", "value": self.starts},
                {"name": "CRASH_TOKEN", "value": self.token}]

    def new_plan(self, kind, code=0, gate=None):
        self.seq += 1
        name = "crash-%d" % self.seq
        self.plans[name] = {"kind": kind, "code": code, "done": False, "gate": gate}
        return name

    def job_body(self, name):
        plan = self.plans[name]
        if plan["kind"] == "natural":
            wait = GATE_WAIT.format(gate=plan["gate"]) if plan["gate"] else "sleep " + self.rng.choice(
                ["0", "0.1", "0.3", "0.8"])
            script = NATURAL.format(wait=wait, code=plan["code"])
        elif plan["kind"] == "kill-supervisor":
            script = ESCAPE + TARGET
        else:
            script = TARGET
        job = {"displayName": name, "jobSpec": {"workerPoolSpecs": [{
            "machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 1,
            "containerSpec": {"imageUri": IMAGE, "command": ["/bin/sh", "-c", script, name],
                              "env": self.env()}}]}}
        if plan["kind"] == "kill-supervisor":
            # A lost replica restarts the job by default; this one must fail.
            job["jobSpec"]["scheduling"] = {"disableRetries": True}
        return job

    def submit(self, name):
        """The job id when acknowledged, else None. A lost reply leaves the job 'maybe'."""
        status, body = self.call("POST", JOBS, self.job_body(name))
        if status == 200:
            job_id = body["name"].rsplit("/", 1)[1]
            self.acked.add(job_id)
            self.by_id[job_id] = name
            self.counts["jobs"] += 1
            return job_id
        if status is None:
            self.counts["unacked_submissions"] += 1
            return None
        self.violation("submission of %s refused: %s %s" % (name, status, body))
        return None

    def list_jobs(self):
        jobs, token = [], ""
        while True:
            status, body = self.call("GET", JOBS + "?pageSize=1000" + (
                "&pageToken=" + token if token else ""))
            if status != 200:
                raise AssertionError("list failed: %s %s" % (status, body))
            jobs += body.get("customJobs", [])
            token = body.get("nextPageToken", "")
            if not token:
                return jobs

    def restart(self, mode):
        self.case.daemon.kill(signal.SIGKILL)
        self.counts["daemon_kills"] += 1
        self.kill_modes[mode] = self.kill_modes.get(mode, 0) + 1
        self.case.daemon = Daemon(self.case.data, self.case.config).start()
        self.check_nothing_lost("after restart %d (%s)" % (self.counts["daemon_kills"], mode))

    def check_nothing_lost(self, when):
        """Every acknowledged job and study exists; jobs whose reply was lost are adopted."""
        self.counts["restarts_checked"] += 1
        seen = {}
        for j in self.list_jobs():
            seen[j["name"].rsplit("/", 1)[1]] = j
        for job_id in sorted(self.acked - set(seen)):
            self.violation("%s: acknowledged job %s (%s) is gone" % (when, job_id, self.by_id[job_id]))
        for job_id, j in seen.items():
            name = j.get("displayName", "")
            if name in self.plans and job_id not in self.by_id:
                self.by_id[job_id] = name  # submitted, reply lost: it exists, so track it
        for sid in self.studies:
            status, body = self.call("GET", STUDIES + "/" + sid)
            if status != 200:
                self.violation("%s: acknowledged study %s is gone (%s)" % (when, sid, status))

    # ---- faults ---------------------------------------------------------------

    def recorded(self):
        """{(kind, job id): [pid, ...]} from the start file ("start", "end", "proc")."""
        out = {}
        for line in read_text(self.starts).splitlines():
            parts = line.split()
            if len(parts) == 3:
                out.setdefault((parts[0], parts[1]), []).append(int(parts[2]))
        return out

    def started_pid(self, job_id, kind="start"):
        pids = self.recorded().get((kind, job_id))
        return pids[0] if pids else None

    def replica_dir(self, job_id):
        return os.path.join(self.case.data, "jobs", job_id, "workerpool0-0")

    def proc_has(self, pid, needle, what="environ"):
        try:
            with open("/proc/%d/%s" % (pid, what), "rb") as f:
                return needle.encode() in f.read()
        except OSError:
            return False

    def fault(self, job_id, during_kill=False):
        """Applies the job's planned fault once its preconditions hold; True when done."""
        name = self.by_id[job_id]
        plan = self.plans[name]
        if plan["kind"] == "cancel":
            r = self.case.stoker("jobs", "cancel", job_id, check=False, timeout=30)
            if r.returncode == 0 or "already ended" in r.stderr:
                plan["done"] = True
                self.counts["cancels"] += 1
            elif not during_kill:
                self.violation("cancel of %s failed with the daemon up: %s" % (job_id, r.stderr))
            return plan["done"]
        if plan["kind"] == "kill-trainer":
            pid = self.started_pid(job_id)
            if pid and self.proc_has(pid, "CLOUD_ML_JOB_ID=%s\0" % job_id):
                os.kill(pid, signal.SIGKILL)
                plan["done"] = True
                self.counts["trainer_kills"] += 1
            return plan["done"]
        if plan["kind"] == "kill-supervisor":
            try:
                pid = json.load(open(os.path.join(self.replica_dir(job_id), "runner.json")))["pid"]
            except (OSError, ValueError, KeyError):
                return False
            # Only once the trainer and its escaped grandchild both run.
            if (self.proc_has(pid, self.replica_dir(job_id), "cmdline") and
                    self.started_pid(job_id) and self.started_pid(job_id, "proc")):
                os.kill(pid, signal.SIGKILL)
                plan["done"] = True
                self.counts["supervisor_kills"] += 1
            return plan["done"]
        return True

    def pending_targets(self):
        return sorted((i for i, n in self.by_id.items()
                       if self.plans[n]["kind"] != "natural" and not self.plans[n]["done"]), key=int)

    # ---- the run --------------------------------------------------------------

    def submit_batch(self):
        for _ in range(self.rng.randint(1, 4)):
            r = self.rng.random()
            if r < 0.3 and len(self.pending_targets()) < self.max_targets:
                name = self.new_plan(self.rng.choice(["cancel", "kill-trainer", "kill-supervisor"]))
            else:
                name = self.new_plan("natural", 0 if r < 0.85 else 3)
            self.submit(name)

    def submit_study(self):
        trials = self.rng.randint(2, 4)
        body = {
            "displayName": "crash-study", "maxTrialCount": trials, "parallelTrialCount": 2,
            "studySpec": {"metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
                          "parameters": [{"parameterId": "x",
                                          "doubleValueSpec": {"minValue": 0.0, "maxValue": 1.0}}],
                          "algorithm": "RANDOM_SEARCH"},
            "trialJobSpec": {"workerPoolSpecs": [{
                "machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 1,
                "containerSpec": {"imageUri": IMAGE, "command": ["python3", self.trainer],
                                  "env": self.env()}}]},
        }
        status, reply = self.call("POST", STUDIES, body)
        if status != 200:
            self.violation("study submission refused: %s %s" % (status, reply))
            return
        self.studies[reply["name"].rsplit("/", 1)[1]] = trials
        self.counts["studies"] += 1

    def hold_and_release(self, delay):
        """Exit mode: trainers held on a gate; the gate opens `delay` s before the kill."""
        gate = os.path.join(self.case.tmp, "gate-%d" % (self.seq + 1))
        names = [self.new_plan("natural", 0 if self.rng.random() < 0.8 else 3, gate=gate)
                 for _ in range(self.rng.randint(1, 3))]
        ids = [i for i in (self.submit(n) for n in names) if i]

        def all_held():
            recorded = self.recorded()
            return all(("start", i) in recorded for i in ids)

        try:
            wait_for(all_held, 20, "the gated trainers to start")
        except AssertionError:
            self.log("exit mode: not every gated trainer started within 20 s; releasing anyway")
        held = sum(1 for i in ids if ("start", i) in self.recorded())
        open(gate, "w").close()  # every held trainer exits within ~10 ms of this
        time.sleep(delay)
        self.restart("exit")
        if held:
            self.counts["exit_kills"] += 1
            self.counts["exit_held_trainers"] += held

    def kill_daemon(self):
        # Every mode once first (in a seeded order), then at random.
        mode = self.first_modes.pop() if self.first_modes else self.rng.choice(KILL_MODES)
        delay = self.rng.uniform(0, 0.03)
        if mode == "exit":
            self.hold_and_release(delay)
            return
        worker = None
        if mode == "submit":
            names = [self.new_plan("natural") for _ in range(self.rng.randint(1, 4))]
            worker = threading.Thread(target=lambda: [self.submit(n) for n in names])
        elif mode == "cancel":
            cancels = [i for i in self.pending_targets()
                       if self.plans[self.by_id[i]]["kind"] == "cancel"]
            if cancels:
                job_id = self.rng.choice(cancels)
                worker = threading.Thread(target=lambda: self.fault(job_id, during_kill=True))
        elif mode == "launch":
            self.submit_batch()  # the control loop is placing and launching these now
        if worker:
            worker.start()
        time.sleep(delay)
        self.restart(mode)
        if worker:
            worker.join()

    def run(self):
        self.log("seed %d, %.0f s of faults (replay with --seed %d)" % (self.seed, self.seconds,
                                                                        self.seed))
        self.case.stoker("storage", "mb", "gs://stoker-outputs", check=False)
        deadline = time.monotonic() + self.seconds
        next_study = time.monotonic()
        next_end_check = time.monotonic()
        while time.monotonic() < deadline:
            if time.monotonic() >= next_study:
                self.submit_study()
                next_study += self.study_every
            if time.monotonic() >= next_end_check:
                self.check_ended_jobs()
                next_end_check = time.monotonic() + 1.0
            r = self.rng.random()
            if r < 0.40:
                self.submit_batch()
            elif r < 0.60:
                targets = self.pending_targets()
                if targets:
                    self.fault(self.rng.choice(targets))
            elif r < 0.68:
                self.kill_daemon()
            else:
                time.sleep(self.rng.uniform(0.02, 0.3))
        t0 = time.monotonic()
        self.drain()
        t1 = time.monotonic()
        self.check()
        self.log("drain %.1f s, checks %.1f s" % (t1 - t0, time.monotonic() - t1))
        return self.counts

    def drain(self):
        """Applies every fault still due, then waits for everything to end."""
        wait_for(lambda: all([self.fault(i) for i in self.pending_targets()]) or None, 120,
                 "every planned fault to be applied")

        def all_ended():
            self.check_ended_jobs()
            active = [j for j in self.list_jobs() if j["state"] not in TERMINAL]
            studies = [s for s in self.studies if self.call("GET", STUDIES + "/" + s)[1].get(
                "state") not in TERMINAL]
            return not active and not studies

        try:
            wait_for(all_ended, 180, "every job and study to end")
        except AssertionError:
            for j in self.list_jobs():
                if j["state"] not in TERMINAL:
                    self.violation("job %s (%s) stuck in %s" % (j["name"].rsplit("/", 1)[1],
                                                                j.get("displayName"), j["state"]))
        # One more crash after the end: terminal states are durable.
        self.restart("after the end")

    # ---- checks -----------------------------------------------------------------

    def expected(self, plan):
        """(state, text in error.message or None, text in the terminal event's reason)."""
        kind = plan["kind"]
        if kind == "natural":
            if plan["code"] == 0:
                return "JOB_STATE_SUCCEEDED", None, "exited with status 0"
            needle = "non-zero status of %d" % plan["code"]
            return "JOB_STATE_FAILED", needle, needle
        return {"cancel": ("JOB_STATE_CANCELLED", None, "cancelled by user"),
                "kill-trainer": ("JOB_STATE_FAILED", "SIGKILL", "SIGKILL"),
                "kill-supervisor": ("JOB_STATE_FAILED", "supervisor (stoker-run) died",
                                    "supervisor (stoker-run) died")}[kind]

    def check_ended_jobs(self):
        """As soon as a job is seen terminal, no process it recorded is alive.

        Runs through the whole run (about once a second), not only at the end:
        a process that outlives its job would otherwise be hidden by a later
        clean-up. A pid is only blamed while its environment still names the
        job (pids are reused)."""
        status, body = self.call("GET", JOBS + "?pageSize=1000")
        if status != 200 or body.get("nextPageToken"):
            jobs = self.list_jobs() if status == 200 else []
        else:
            jobs = body.get("customJobs", [])
        ended = [j for j in jobs if j["state"] in TERMINAL and
                 j["name"].rsplit("/", 1)[1] not in self.end_checked]
        if not ended:
            return
        recorded = self.recorded()  # read after the list: holds every line written before the end
        for j in ended:
            job_id = j["name"].rsplit("/", 1)[1]
            self.end_checked.add(job_id)
            self.counts["end_checks"] += 1
            for kind in ("start", "proc"):
                for pid in recorded.get((kind, job_id), []):
                    if kind == "proc":
                        self.counts["escaped_grandchildren_checked"] += 1
                    if pid_alive(pid) and self.proc_has(pid, "CLOUD_ML_JOB_ID=%s\0" % job_id):
                        self.violation("job %s (%s) is %s but its %s process %d is alive" % (
                            job_id, j.get("displayName"), j["state"],
                            "trainer" if kind == "start" else "escaped grandchild", pid))

    def job_log(self, job_id, replica="workerpool0-0"):
        """The replica's whole log through the REST route the CLI's `jobs logs` reads."""
        data, offset = "", 0
        while True:
            status, body = self.call("GET", "%s/%s/logs?replica=%s&offset=%d" % (
                JOBS, job_id, replica, offset))
            if status != 200:
                return data + "<logs: %s %s>" % (status, body)
            chunk = body.get("data", "")
            if not chunk:
                return data
            data += chunk
            offset = body.get("nextOffset", offset + len(chunk.encode()))

    def check_events(self, job_id, job, expect):
        """Exactly one transition into a terminal state, the last of one
        chain, into the job's state, with the reason `expect` gives."""
        status, body = self.call("GET", JOBS + "/" + job_id + "/events")
        if status != 200:
            self.violation("job %s: events: %s %s" % (job_id, status, body))
            return
        self.counts["events_checked"] += 1
        events = body.get("events", [])
        history = " -> ".join(e["to"].replace("JOB_STATE_", "") for e in events)
        into = [e for e in events if e["to"] in TERMINAL]
        if len(into) != 1:
            self.violation("job %s: %d transitions into a terminal state: %s" % (
                job_id, len(into), history))
        for prev, e in zip(events, events[1:]):
            if e["from"] != prev["to"]:
                self.violation("job %s: events do not chain (%s then %s -> %s): %s" % (
                    job_id, prev["to"], e["from"], e["to"], history))
                break
        if not events or events[-1]["to"] != job["state"]:
            self.violation("job %s is %s but its last event says %s" % (
                job_id, job["state"], events[-1]["to"] if events else "nothing"))
        if into and expect:
            state, needle = expect
            if into[-1]["to"] != state or needle not in into[-1]["reason"]:
                self.violation("job %s: ended %s (%r), expected %s with %r" % (
                    job_id, into[-1]["to"], into[-1]["reason"][:200], state, needle))

    def check(self):
        jobs = {j["name"].rsplit("/", 1)[1]: j for j in self.list_jobs()}
        self.check_ended_jobs()
        starts, ends = {}, {}
        for (kind, job_id), pids in self.recorded().items():
            if kind in ("start", "end"):
                (starts if kind == "start" else ends).setdefault(job_id, []).extend(pids)
        for job_id, pids in starts.items():
            if len(pids) > 1:
                self.violation("job %s: trainer ran %d times (pids %s)" % (job_id, len(pids), pids))
            if job_id not in jobs:
                self.violation("a trainer ran for job %s, which the API does not know" % job_id)
        for job_id, j in jobs.items():
            if j["state"] not in TERMINAL:
                self.violation("job %s not terminal: %s" % (job_id, j["state"]))
            name = j.get("displayName", "")
            if name not in self.plans:
                # A trial (its study checks how many and how they ended).
                self.check_events(job_id, j, ("JOB_STATE_SUCCEEDED", "exited with status 0"))
                continue
            plan = self.plans[name]
            state, needle, reason = self.expected(plan)
            self.check_events(job_id, j, (state, reason))
            message = j.get("error", {}).get("message", "")
            if j["state"] != state or (needle and needle not in message):
                self.violation("job %s (%s, %s): %s %r, expected %s with %r" % (
                    job_id, name, plan["kind"], j["state"], message[:200], state, needle))
            if plan["kind"] == "natural":
                if len(starts.get(job_id, [])) != 1 or len(ends.get(job_id, [])) != 1:
                    self.violation("job %s: %d start and %d end lines, expected 1 and 1" % (
                        job_id, len(starts.get(job_id, [])), len(ends.get(job_id, []))))
                logs = self.job_log(job_id)
                if "%s %s" % (LAST_LINE, job_id) not in logs:
                    self.violation("job %s: logs lack the last line; tail: %r" % (job_id, logs[-200:]))
        for sid, want in self.studies.items():
            _, s = self.call("GET", STUDIES + "/" + sid)
            trials = s.get("trials", [])
            if s.get("state") != "JOB_STATE_SUCCEEDED" or len(trials) != want or any(
                    t["state"] != "SUCCEEDED" for t in trials):
                self.violation("study %s: %s with %d trial(s) %s, expected SUCCEEDED with %d" % (
                    sid, s.get("state"), len(trials), [t["state"] for t in trials], want))
        self.check_no_process_left()
        self.counts["violations"] = len(self.violations)
        self.counts["jobs_checked"] = len(jobs)
        self.counts["trials_checked"] = sum(1 for j in jobs.values()
                                            if j.get("displayName", "") not in self.plans)
        self.counts["daemon_kills_by_mode"] = dict(self.kill_modes)
        self.log("seed %d: %s" % (self.seed, json.dumps(self.counts, sort_keys=True)))

    def leftovers(self):
        """Processes of this run's replicas (trainers by their environment, supervisors by dir)."""
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            pid = int(entry)
            if self.proc_has(pid, "CRASH_TOKEN=%s\0" % self.token) or (
                    self.proc_has(pid, "stoker-run", "cmdline") and
                    self.proc_has(pid, self.case.data, "cmdline")):
                try:
                    state = read_text("/proc/%d/stat" % pid).rsplit(")", 1)[1].split()[0]
                except (OSError, IndexError):
                    continue
                if state != "Z":
                    found.append(pid)
        return found

    def check_no_process_left(self):
        # Every job is terminal; supervisors may still be finishing their last write.
        try:
            wait_for(lambda: not self.leftovers(), 15, "replica processes to be gone")
        except AssertionError:
            for pid in self.leftovers():
                try:
                    cmd = read_text("/proc/%d/cmdline" % pid).replace("\0", " ")
                except OSError:
                    continue
                self.violation("process %d outlives its job: %s" % (pid, cmd[:200]))


class CrashTest(StokerTestCase):
    seed = None
    seconds = 45.0

    def test_random_kills_lose_no_job_and_run_none_twice(self):
        seed = self.seed
        if seed is None and os.environ.get("STOKER_CRASH_SEED"):
            seed = int(os.environ["STOKER_CRASH_SEED"])
        if seed is None:
            seed = random.SystemRandom().randrange(1, 1 << 30)
        counts = Chaos(self, seed, self.seconds).run()
        self.assertEqual(counts["violations"], 0, "seed %d; replay with --seed %d" % (seed, seed))
        self.assertGreater(counts["daemon_kills"], 0)
        # The run reached a kill of every kind, the replica-exit window included.
        self.assertEqual(sorted(counts["daemon_kills_by_mode"]), sorted(KILL_MODES + ["after the end"]),
                         counts)
        self.assertGreater(counts["exit_kills"], 0, counts)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=0.75, help="how long to inject faults")
    p.add_argument("--seed", type=int, default=None, help="replay a run")
    args, rest = p.parse_known_args()
    CrashTest.seconds = args.minutes * 60
    CrashTest.seed = args.seed
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
