"""One executor contract, two executors (DESIGN.md §4, docs/slurm.md).

The same tests (the ExecutorContract mixin) run against the local executor
(always; ctest runs this file) and against the Slurm executor when
STOKER_TEST_SLURM=1. With STOKER_TEST_SLURM=1 a Slurm that does not answer
fails the Slurm tests instead of skipping them: CI must not pass by skipping.
Each test drives a real stokerd and real trainers; the Slurm variant submits
real Slurm jobs (scripts/slurm-localhost.sh starts a one-node cluster on this
host with the partitions `debug` and `second`).

Run: STOKER_TEST_SLURM=1 python3 tests/e2e/test_executor_contract.py [CLASS[.TEST]]
With STOKER_TEST_FAIL_ON_SKIP=1 the run fails when any test was skipped.
"""
import json
import os
import shutil
import signal
import stat
import subprocess
import unittest

from harness import (DEFAULT_CONFIG, IMAGE, SOURCE, Daemon, StokerTestCase, cancel_slurm_jobs_of,
                     main, pid_alive, read_text, wait_for)

# A machine type small enough that two 5-replica jobs fit on the one-node
# Slurm of CI (16 CPUs, 32 GB) at once, as they do locally.
CONFIG = DEFAULT_CONFIG + "machine_types: {contract-tiny: {vcpus: 1, memory_gb: 1}}\n"


def pool(script, count=1, machine="e2-standard-2"):
    """A worker pool of `count` replicas, each running `sh -c SCRIPT`."""
    return {"machineSpec": {"machineType": machine}, "replicaCount": count,
            "containerSpec": {"imageUri": IMAGE, "command": ["/bin/sh", "-c", script]}}


def job_of(name, pools, timeout=None, labels=None, priority=None):
    job = {"displayName": name, "jobSpec": {"workerPoolSpecs": pools}}
    scheduling = {}
    if timeout:
        scheduling["timeout"] = timeout
    if priority is not None:
        scheduling["priority"] = priority
    if scheduling:
        job["jobSpec"]["scheduling"] = scheduling
    if labels:
        job["labels"] = labels
    return job


def job_seconds(job):
    """Seconds from the job's startTime to its endTime."""
    import datetime

    def t(s):
        return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
    return t(job["endTime"]) - t(job["startTime"])


def two_replica_job(name, chief, worker, timeout=None, labels=None, priority=None):
    """Pool 0 (chief) and pool 1 (one worker)."""
    return job_of(name, [pool(chief), pool(worker)], timeout, labels, priority)


def slurm_unavailable():
    """Why Slurm cannot be used here, or None."""
    if not shutil.which("sinfo"):
        return "sinfo not found: Slurm is not installed"
    r = subprocess.run(["sinfo", "-h", "-o", "%a"], capture_output=True, text=True)
    if r.returncode != 0 or "up" not in r.stdout:
        return "sinfo does not answer with an up partition: %s" % (r.stderr.strip() or r.stdout)
    return None


def squeue(*args):
    """squeue's output with `args`; "" when the job id is no longer known."""
    return subprocess.run(["squeue", "-h"] + list(args), capture_output=True, text=True).stdout.strip()


def parse_env(text):
    return dict(l.split("=", 1) for l in text.splitlines() if "=" in l)


class ExecutorContract:
    """The tests. Mixed into one TestCase per executor below."""

    slurm = False

    def out(self, *parts):
        d = os.path.join(self.tmp, "out")
        os.makedirs(d, exist_ok=True)
        return os.path.join(d, *parts)

    def starts(self):
        """One line per trainer process that ever started, from every test job."""
        try:
            return read_text(self.out("starts")).split()
        except FileNotFoundError:
            return []

    def slurm_jobs(self, job_id, attempt=0):
        """Slurm jobs (any state Slurm still remembers) carrying this attempt's name."""
        if not self.slurm:
            return []
        r = subprocess.run(["squeue", "-h", "-t", "all", "--name",
                            "stoker-%s-%d" % (job_id, attempt), "-o", "%i|%k"],
                           capture_output=True, text=True, check=True)
        instance = read_text(os.path.join(self.data, "slurm-instance")).strip()
        return [l.split("|")[0] for l in r.stdout.split()
                if l.split("|")[1].endswith(":" + instance)]

    def assert_slurm_job_ended(self, job_id):
        """On Slurm: the attempt's one Slurm job leaves the queue (squeue's
        default states: pending, running, completing)."""
        if not self.slurm:
            return
        ids = self.slurm_jobs(job_id)
        self.assertEqual(len(ids), 1, ids)
        wait_for(lambda: squeue("-j", ids[0], "-o", "%T") == "", 60,
                 "Slurm job %s to end (squeue: %s)" % (ids[0], squeue("-j", ids[0], "-o", "%T")))

    def record_start(self):
        return "echo $RANK-$$ >> %s; " % self.out("starts")

    def stoppable(self, tag="$RANK"):
        """A trainer that records its pid, and on SIGTERM writes term-TAG and
        exits 143; otherwise it runs for ever."""
        out = self.out()
        return (self.record_start() +
                "trap 'echo TERM > %s/term-%s; exit 143' TERM; echo $$ > %s/pid-%s; "
                "while :; do sleep 0.2; done" % (out, tag, out, tag))

    def assert_stopped_by_term(self, tags):
        """Each trainer `tags` got SIGTERM (wrote its mark) and is gone."""
        for t in tags:
            pid = int(read_text(self.out("pid-%s" % t)))
            wait_for(lambda: not pid_alive(pid), 30, "replica %s (pid %d) to stop" % (t, pid))
            self.assertTrue(os.path.exists(self.out("term-%s" % t)),
                            "replica %s stopped without getting SIGTERM first" % t)

    # -- the environment -------------------------------------------------

    def test_four_pools_see_the_reference_environment_and_jobs_get_their_own_ports(self):
        # Two jobs of chief, 2 workers, 1 parameter server and 1 evaluator
        # run at once: every chief waits until all ten replicas have written
        # their environment, so both jobs are running when the ports are read.
        names = ("a", "b")
        for n in names:
            os.makedirs(self.out(n))
        everyone = " ".join(self.out(n, "env-%d" % r) for n in names for r in range(5))
        wait_all = ("for f in %s; do i=0; while [ ! -f $f ] && [ $i -lt 900 ]; do sleep 0.1; "
                    "i=$((i+1)); done; done" % everyone)

        def job(n):
            dump = "env > %s/env-$RANK.tmp && mv %s/env-$RANK.tmp %s/env-$RANK; " % (
                (self.out(n),) * 3)
            rest = dump + "sleep 1000"
            return job_of("env-" + n, [pool(dump + wait_all, 1, "contract-tiny"),
                                       pool(rest, 2, "contract-tiny"),
                                       pool(rest, 1, "contract-tiny"),
                                       pool(rest, 1, "contract-tiny")])
        ids = [self.submit(job(n)) for n in names]
        for job_id in ids:
            final = self.wait_state(job_id, timeout=120)
            self.assertEqual(final["state"], "JOB_STATE_SUCCEEDED", final.get("error"))
        master_ports, addresses = [], []
        for n, job_id in zip(names, ids):
            envs = [parse_env(read_text(self.out(n, "env-%d" % r))) for r in range(5)]
            port, job_addresses = self.check_job_env(job_id, envs)
            master_ports.append(port)
            addresses += job_addresses
        self.assertNotEqual(master_ports[0], master_ports[1],
                            "two jobs running at once share MASTER_PORT")
        # All ten replicas ran on this host at once: no two share a port.
        self.assertEqual(len(set(addresses)), 10, addresses)

    def check_job_env(self, job_id, envs):
        """Asserts the environment of one 4-pool job (envs by RANK) against
        reference/vertex.md §3.2 and §3.4; returns its MASTER_PORT and the
        replicas' addresses."""
        roles = [("workerpool0", 0, "chief"), ("workerpool1", 0, "worker"),
                 ("workerpool1", 1, "worker"), ("workerpool2", 0, "ps"),
                 ("workerpool3", 0, "evaluator")]
        specs = [json.loads(e["CLUSTER_SPEC"]) for e in envs]
        cluster = specs[0]["cluster"]
        self.assertEqual({k: len(v) for k, v in cluster.items()},
                         {"workerpool0": 1, "workerpool1": 2, "workerpool2": 1, "workerpool3": 1})
        addresses = [a for p in sorted(cluster) for a in cluster[p]]  # in rank order
        self.assertEqual(len(set(addresses)), 5, addresses)  # one port per replica
        master = addresses[0]
        host, port = master.rsplit(":", 1)
        self.assertGreater(int(port), 0)
        for rank, (env, cs, (pool_key, index, tf_role)) in enumerate(zip(envs, specs, roles)):
            where = "rank %d" % rank
            self.assertEqual(env["RANK"], str(rank), where)
            self.assertEqual(env["WORLD_SIZE"], "5", where)
            self.assertEqual(cs["cluster"], cluster, where)
            self.assertEqual(cs["task"], {"type": pool_key, "index": index}, where)
            self.assertEqual(cs["environment"], "cloud", where)
            self.assertIsInstance(cs["job"], str, where)  # a JSON string, as on Vertex
            self.assertEqual((env["MASTER_ADDR"], env["MASTER_PORT"]), (host, port), where)
            tf = json.loads(env["TF_CONFIG"])
            self.assertEqual(tf["cluster"], {"chief": cluster["workerpool0"],
                                             "worker": cluster["workerpool1"],
                                             "ps": cluster["workerpool2"]}, where)
            self.assertEqual(tf["task"], {"type": tf_role, "index": index}, where)
            self.assertEqual(tf["environment"], "cloud", where)
            self.assertEqual(env["CUDA_VISIBLE_DEVICES"], "", where)
            self.assertEqual(env["CLOUD_ML_JOB_ID"], job_id, where)
        if self.slurm:
            # Slurm packs the CPU-only tasks on the one node: ranks by node.
            node = squeue("-t", "all", "-j", envs[0]["SLURM_JOB_ID"], "-o", "%N")
            self.assertEqual({a.rsplit(":", 1)[0] for a in addresses}, {node})
            self.assertEqual(sorted(e["LOCAL_RANK"] for e in envs), ["0", "1", "2", "3", "4"])
            self.assertEqual({e["LOCAL_WORLD_SIZE"] for e in envs}, {"5"})
            self.assertEqual({e["SLURM_JOB_ID"] for e in envs}, set(self.slurm_jobs(job_id)))
        else:
            self.assertEqual({a.rsplit(":", 1)[0] for a in addresses}, {"127.0.0.1"})
            self.assertEqual({(e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"]) for e in envs}, {("0", "1")})
        return port, addresses

    def test_ddp_example_runs_as_one_chief_and_two_workers(self):
        example = os.path.join(SOURCE, "examples", "ddp")
        self.stoker("storage", "mb", "gs://ddp")
        r = self.stoker("jobs", "submit", "--config", os.path.join(example, "job.yaml"),
                        "--package-path", os.path.join(example, "trainer"),
                        "--module-name", "trainer.task", "--follow", check=False, timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-2000:])
        self.assertRegex(r.stdout, r"final val_loss=0\.02")

    # -- stopping ----------------------------------------------------------

    def test_cancel_sends_the_graceful_signal_first_and_stops_every_replica(self):
        job_id = self.submit(two_replica_job("cancel", self.stoppable(), self.stoppable()))
        wait_for(lambda: all(os.path.exists(self.out("pid-%d" % r)) for r in (0, 1)), 90,
                 "both replicas to start")
        wait_for(lambda: self.job(job_id)["state"] == "JOB_STATE_RUNNING", 30, "RUNNING")
        self.stoker("jobs", "cancel", job_id)
        job = self.wait_state(job_id, timeout=60)
        self.assertEqual(job["state"], "JOB_STATE_CANCELLED")
        self.assert_stopped_by_term([0, 1])
        self.assert_slurm_job_ended(job_id)

    def test_timeout_fails_with_deadline_exceeded_and_stops_every_replica(self):
        job_id = self.submit(two_replica_job("slow", self.stoppable(), self.stoppable(),
                                             timeout="3s"))
        job = self.wait_state(job_id, timeout=90)
        self.assertEqual(job["state"], "JOB_STATE_FAILED")
        self.assertEqual(job["error"]["code"], 4)
        self.assertIn("scheduling.timeout of 3s", job["error"]["message"])
        self.assert_stopped_by_term([0, 1])
        self.assert_slurm_job_ended(job_id)

    def test_failing_replica_fails_the_job_with_its_code_and_log_tail_and_stops_the_others(self):
        # The worker fails once the chief runs; the chief must then be stopped.
        worker = ("while [ ! -f %s ]; do sleep 0.1; done; echo preparing; echo 'bad things' >&2; "
                  "exit 3" % self.out("pid-0"))
        job_id = self.submit(two_replica_job("boom", self.stoppable(), worker))
        job = self.wait_state(job_id, timeout=90)
        self.assertEqual(job["state"], "JOB_STATE_FAILED")
        msg = job["error"]["message"]
        self.assertIn("workerpool1-0", msg)
        self.assertIn("non-zero status of 3", msg)
        self.assertTrue(msg.rstrip().endswith("bad things"), msg)
        self.assert_stopped_by_term([0])
        self.assert_slurm_job_ended(job_id)

    def test_daemon_killed_mid_job_readopts_and_the_job_succeeds_once(self):
        go = self.out("go")
        script = self.record_start() + "while [ ! -f %s ]; do sleep 0.1; done" % go
        job_id = self.submit(two_replica_job("restart", script, script))
        wait_for(lambda: len(self.starts()) == 2, 90, "both replicas to start")
        wait_for(lambda: self.job(job_id)["state"] == "JOB_STATE_RUNNING", 30, "RUNNING")
        self.daemon.kill(signal.SIGKILL)
        self.daemon = Daemon(self.data, self.config).start()
        open(go, "w").close()
        job = self.wait_state(job_id, timeout=60)
        self.assertEqual(job["state"], "JOB_STATE_SUCCEEDED", job.get("error"))
        self.assertEqual(len(self.starts()), 2, self.starts())
        if self.slurm:
            self.assertEqual(len(self.slurm_jobs(job_id)), 1)
        # The usage ledger (docs/cost.md) has both replicas once, with their
        # booked 2 vCPUs (e2-standard-2), whichever executor ran them.
        usage = self.job(job_id)["stoker"]["usage"]
        self.assertGreater(usage["replicaHours"], 0)
        self.assertAlmostEqual(usage["vcpuHours"], 2 * usage["replicaHours"], places=9)
        run_s = job_seconds(job)
        self.assertLessEqual(usage["replicaHours"] * 3600, 2 * run_s + 1, usage)


class LocalExecutorContractTest(ExecutorContract, StokerTestCase):
    config = CONFIG


def require_slurm(case):
    """Skips `case` unless STOKER_TEST_SLURM=1; then fails it when Slurm
    cannot be used (a run that asked for Slurm must not pass without it)."""
    if os.environ.get("STOKER_TEST_SLURM") != "1":
        case.skipTest("STOKER_TEST_SLURM=1 not set (CI sets it after scripts/slurm-localhost.sh)")
    why = slurm_unavailable()
    if why:
        case.fail("STOKER_TEST_SLURM=1 but Slurm cannot be used: %s "
                  "(start it with scripts/slurm-localhost.sh)" % why)


class SlurmExecutorContractTest(ExecutorContract, StokerTestCase):
    slurm = True
    config = CONFIG + "executor: slurm\nslurm: {grace_seconds: 5}\n"

    def setUp(self):
        require_slurm(self)
        super().setUp()

    def tearDown(self):
        cancel_slurm_jobs_of(self.data)  # this daemon's Slurm jobs only
        super().tearDown()

    def restart_submitting_held_jobs(self):
        """Held jobs stay PENDING in Slurm with reason JobHeldUser."""
        self.daemon.kill(signal.SIGTERM)
        self.config = self.config.replace("slurm: {", 'slurm: {sbatch_extra_args: ["--hold"], ')
        self.daemon = Daemon(self.data, self.config).start()

    def wait_reason(self, job_id):
        s, e = self.api("GET", self.project_path + "/" + job_id + "/events")
        return e.get("waitReason", "") if s == 200 else ""

    def test_pending_reason_shows_and_a_crash_before_the_id_is_recorded_submits_once(self):
        self.restart_submitting_held_jobs()
        job_id = self.submit(two_replica_job("held", self.record_start(), self.record_start()))
        why = wait_for(lambda: (lambda r: r if "JobHeldUser" in r else None)(self.wait_reason(job_id)),
                       30, "the Slurm reason")
        self.assertRegex(why, r"^Slurm job \d+ is pending: JobHeldUser$")
        d = self.stoker("jobs", "describe", job_id).stdout
        self.assertIn("JobHeldUser", d)
        # A crash right after sbatch, before the id was recorded: the restarted
        # daemon must find the job in Slurm rather than submit another.
        self.daemon.kill(signal.SIGKILL)
        os.unlink(os.path.join(self.data, "jobs", job_id, "slurm-job-id"))
        self.daemon = Daemon(self.data, self.config).start()
        ids = wait_for(lambda: os.path.exists(os.path.join(self.data, "jobs", job_id, "slurm-job-id"))
                       and self.slurm_jobs(job_id), 30, "the job id to be recorded again")
        self.assertEqual(len(ids), 1, ids)
        subprocess.run(["scontrol", "release", ids[0]], check=True)
        job = self.wait_state(job_id, timeout=60)
        self.assertEqual(job["state"], "JOB_STATE_SUCCEEDED", job.get("error"))
        self.assertEqual(len(self.slurm_jobs(job_id)), 1)
        self.assertEqual(len(self.starts()), 2)

    def test_a_slurm_job_that_ends_before_stoker_run_starts_is_lost_with_slurms_reason(self):
        self.restart_submitting_held_jobs()
        job_id = self.submit(two_replica_job("gone", self.record_start(), self.record_start()))
        ids = wait_for(lambda: self.slurm_jobs(job_id), 30, "the Slurm job")
        # Cancelled behind Stoker's back while queued: Stoker must not wait
        # forever; the replicas are lost with Slurm's reason (then the restart
        # policy may start a new attempt, which stays held here).
        subprocess.run(["scancel", ids[0]], check=True)
        want = "Slurm job %s ended CANCELLED (JobHeldUser) before stoker-run started" % ids[0]

        def said():
            s, e = self.api("GET", self.project_path + "/" + job_id + "/events")
            reasons = [ev["reason"] for ev in e.get("events", [])]
            return any(want in r for r in reasons) or want in (self.job(job_id).get("error") or {}).get("message", "")
        wait_for(said, 60, "the job to report the Slurm job's end")
        self.assertEqual(self.starts(), [])
        self.stoker("jobs", "cancel", job_id)
        self.assertEqual(self.wait_state(job_id, timeout=60)["state"], "JOB_STATE_CANCELLED")

    def test_labels_choose_the_partition_and_priority_sets_nice_and_no_requeue(self):
        job_id = self.submit(two_replica_job(
            "part", self.record_start(), self.record_start(),
            labels={"slurm-partition": "second"}, priority=10))
        job = self.wait_state(job_id, timeout=90)
        self.assertEqual(job["state"], "JOB_STATE_SUCCEEDED", job.get("error"))
        ids = self.slurm_jobs(job_id)
        self.assertEqual(len(ids), 1, ids)
        # Slurm remembers an ended job for MinJobAge (300 s by default); the
        # batch step may still be completing when the Stoker job has ended.
        wait_for(lambda: squeue("-t", "all", "-j", ids[0], "-o", "%P|%T") == "second|COMPLETED",
                 60, "Slurm job %s to complete in partition second (squeue: %s)" % (
                     ids[0], squeue("-t", "all", "-j", ids[0], "-o", "%P|%T")))
        show = subprocess.run(["scontrol", "show", "job", ids[0]], capture_output=True,
                              text=True, check=True).stdout
        self.assertIn("Partition=second", show)
        self.assertIn("Requeue=0", show)
        # A root stokerd gives nice = -priority (docs/slurm.md).
        want_nice = -10 if os.geteuid() == 0 else 990
        self.assertIn("Nice=%d" % want_nice, show)
        self.assertEqual(len(self.starts()), 2)

    @unittest.skipUnless(os.geteuid() == 0, "needs a root daemon to switch accounts")
    def test_a_root_daemon_runs_slurm_trainers_as_the_default_account_as_locally(self):
        # The contract config lets root run trainers; the default does not.
        self.daemon.kill(signal.SIGTERM)
        self.config = self.config.replace("default_unix_user: root\nallow_root_trainers: true\n", "")
        os.chmod(self.tmp, 0o711)
        os.chmod(self.data, 0o711)
        self.daemon = Daemon(self.data, self.config).start()
        job_id = self.submit(two_replica_job("who", "id -u", "id -u"))
        job = self.wait_state(job_id, timeout=90)
        self.assertEqual(job["state"], "JOB_STATE_SUCCEEDED", job.get("error"))
        log = self.stoker("jobs", "logs", job_id).stdout
        self.assertEqual([l.split()[-1] for l in log.splitlines() if l.strip()], ["65534", "65534"],
                         log)
        # Only work/ (and hypertune/) are the trainer's: the job dir, with
        # the batch script and job id, and the replica dir, with the
        # supervisor's files, are root's, as locally.
        job_dir = os.stat(os.path.join(self.data, "jobs", job_id))
        self.assertEqual((job_dir.st_uid, stat.S_IMODE(job_dir.st_mode)), (0, 0o711))
        replica = os.path.join(self.data, "jobs", job_id, "workerpool0-0")
        replica_dir = os.stat(replica)
        self.assertEqual((replica_dir.st_uid, replica_dir.st_gid, stat.S_IMODE(replica_dir.st_mode)),
                         (0, 65534, 0o750))
        work = os.stat(os.path.join(replica, "work"))
        self.assertEqual((work.st_uid, stat.S_IMODE(work.st_mode)), (65534, 0o700))
        # Both jobs run as nobody, so only job isolation (auto by default)
        # keeps the second from reading the first's files.
        first = os.path.join(self.data, "jobs", job_id, "workerpool0-0", "output.log")
        self.assertTrue(os.path.exists(first))
        peek = self.submit(two_replica_job(
            "peek", "cat %s; echo cat=$?; cat %s/token; echo token=$?" % (first, self.data), "true"))
        job = self.wait_state(peek, timeout=90)
        self.assertEqual(job["state"], "JOB_STATE_SUCCEEDED", job.get("error"))
        log = self.stoker("jobs", "logs", peek, "--replica", "workerpool0-0").stdout
        self.assertIn("cat=1", log)
        self.assertIn("token=1", log)
        self.assertIn("No such file or directory", log)
        self.assertNotIn("65534", log)
        # A user mapped to root is refused, as locally.
        self.stoker("admin", "users", "add", "rooty", "--role", "user", "--unix-user", "root")
        token = self.stoker("admin", "users", "token", "rooty").stdout.strip()
        status, body = self.api("POST", self.project_path, two_replica_job("asroot", "id -u", "id -u"),
                                token=token)
        self.assertEqual(status, 200, body)
        final = self.wait_state(body["name"].rsplit("/", 1)[1], timeout=60)
        self.assertEqual(final["state"], "JOB_STATE_FAILED")
        self.assertIn("allow_root_trainers", final["error"]["message"])


if __name__ == "__main__":
    main()
