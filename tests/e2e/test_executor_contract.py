"""One executor contract, two executors (DESIGN.md §4, docs/slurm.md).

The same tests run against the local executor (always) and against the
Slurm executor (when STOKER_TEST_SLURM=1 and `sinfo` answers; otherwise those
variants are skipped with the reason). Each drives a real stokerd and real
trainers; the Slurm variant submits real Slurm jobs (scripts/slurm-localhost.sh
starts a one-node cluster on this host).

Run: STOKER_TEST_SLURM=1 python3 tests/e2e/test_executor_contract.py
"""
import json
import os
import re
import shutil
import signal
import subprocess
import unittest

from harness import (DEFAULT_CONFIG, IMAGE, SOURCE, Daemon, StokerTestCase, pid_alive, read_text,
                     wait_for)


def two_replica_job(name, chief, worker, timeout=None, labels=None):
    """Pool 0 (chief) and pool 1 (one worker), each running `sh -c SCRIPT`."""
    def pool(script):
        return {"machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 1,
                "containerSpec": {"imageUri": IMAGE, "command": ["/bin/sh", "-c", script]}}
    job = {"displayName": name, "jobSpec": {"workerPoolSpecs": [pool(chief), pool(worker)]}}
    if timeout:
        job["jobSpec"]["scheduling"] = {"timeout": timeout}
    if labels:
        job["labels"] = labels
    return job


def slurm_unavailable():
    """Why the Slurm variants cannot run here, or None."""
    if os.environ.get("STOKER_TEST_SLURM") != "1":
        return "STOKER_TEST_SLURM=1 not set (CI sets it after scripts/slurm-localhost.sh)"
    if not shutil.which("sinfo"):
        return "sinfo not found: Slurm is not installed"
    r = subprocess.run(["sinfo", "-h", "-o", "%a"], capture_output=True, text=True)
    if r.returncode != 0 or "up" not in r.stdout:
        return "sinfo does not answer with an up partition: %s" % (r.stderr.strip() or r.stdout)
    return None


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
            with open(self.out("starts")) as f:
                return f.read().split()
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

    def record_start(self):
        return "echo $RANK-$$ >> %s; " % self.out("starts")

    def test_two_replicas_see_one_consistent_cluster(self):
        out = self.out()
        dump = self.record_start() + "env > %s/env-$RANK.tmp && mv %s/env-$RANK.tmp %s/env-$RANK; " % (
            out, out, out)
        chief = dump + "i=0; while [ ! -f %s/env-1 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done" % out
        job_id = self.submit(two_replica_job("env", chief, dump + "sleep 1000"))
        job = self.wait_state(job_id, timeout=90)
        self.assertEqual(job["state"], "JOB_STATE_SUCCEEDED", job.get("error"))
        envs = []
        for rank in (0, 1):
            with open(os.path.join(out, "env-%d" % rank)) as f:
                text = f.read()
            envs.append(dict(l.split("=", 1) for l in text.splitlines() if "=" in l))
        clusters = [json.loads(e["CLUSTER_SPEC"]) for e in envs]
        self.assertEqual(clusters[0]["cluster"], clusters[1]["cluster"])
        cluster = clusters[0]["cluster"]
        self.assertEqual(sorted(cluster), ["workerpool0", "workerpool1"])
        chief_addr, worker_addr = cluster["workerpool0"][0], cluster["workerpool1"][0]
        self.assertNotEqual(chief_addr, worker_addr)
        self.assertNotIn(":0", [chief_addr[-2:], worker_addr[-2:]])  # real ports, not placeholders
        for rank, (env, cs) in enumerate(zip(envs, clusters)):
            self.assertEqual(env["RANK"], str(rank))
            self.assertEqual(env["WORLD_SIZE"], "2")
            self.assertEqual(cs["task"], {"type": "workerpool%d" % rank, "index": 0})
            self.assertEqual("%s:%s" % (env["MASTER_ADDR"], env["MASTER_PORT"]), chief_addr)
            tf = json.loads(env["TF_CONFIG"])
            self.assertEqual(tf["cluster"], {"chief": [chief_addr], "worker": [worker_addr]})
        if self.slurm:
            slurm_id = int(envs[0]["SLURM_JOB_ID"])
            self.assertEqual(int(envs[0]["MASTER_PORT"]), 20000 + slurm_id % 20000)
            self.assertEqual(self.slurm_jobs(job_id), [str(slurm_id)])
        self.assertEqual(len(self.starts()), 2)

    def test_cancel_stops_every_replica(self):
        script = self.record_start() + "echo $$ > %s/pid-$RANK; exec sleep 1000" % self.out()
        job_id = self.submit(two_replica_job("cancel", script, script))
        wait_for(lambda: all(os.path.exists(self.out("pid-%d" % r)) for r in (0, 1)), 90,
                 "both replicas to start")
        wait_for(lambda: self.job(job_id)["state"] == "JOB_STATE_RUNNING", 30, "RUNNING")
        self.stoker("jobs", "cancel", job_id)
        job = self.wait_state(job_id, timeout=60)
        self.assertEqual(job["state"], "JOB_STATE_CANCELLED")
        for r in (0, 1):
            pid = int(read_text(self.out("pid-%d" % r)))
            wait_for(lambda: not pid_alive(pid), 30, "replica %d (pid %d) to stop" % (r, pid))
        if self.slurm:
            ids = self.slurm_jobs(job_id)
            self.assertEqual(len(ids), 1)
            wait_for(lambda: subprocess.run(["squeue", "-h", "-j", ids[0], "-o", "%T"],
                                            capture_output=True, text=True).stdout.strip() == "",
                     60, "Slurm job %s to end" % ids[0])

    def test_timeout_fails_with_deadline_exceeded(self):
        job_id = self.submit(two_replica_job("slow", "sleep 60", "sleep 60", timeout="2s"))
        job = self.wait_state(job_id, timeout=90)
        self.assertEqual(job["state"], "JOB_STATE_FAILED")
        self.assertEqual(job["error"]["code"], 4)
        self.assertIn("scheduling.timeout of 2s", job["error"]["message"])

    def test_failing_replica_fails_the_job_with_its_code_and_log_tail(self):
        job_id = self.submit(two_replica_job(
            "boom", "exec sleep 1000", "echo preparing; echo 'bad things' >&2; exit 3"))
        job = self.wait_state(job_id, timeout=90)
        self.assertEqual(job["state"], "JOB_STATE_FAILED")
        msg = job["error"]["message"]
        self.assertIn("workerpool1-0", msg)
        self.assertIn("non-zero status of 3", msg)
        self.assertTrue(msg.rstrip().endswith("bad things"), msg)

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


class LocalExecutorContractTest(ExecutorContract, StokerTestCase):
    config = DEFAULT_CONFIG


class SlurmExecutorContractTest(ExecutorContract, StokerTestCase):
    slurm = True
    config = DEFAULT_CONFIG + "executor: slurm\nslurm: {grace_seconds: 5}\n"

    def setUp(self):
        why = slurm_unavailable()
        if why:
            self.skipTest(why)
        super().setUp()

    def tearDown(self):
        # This daemon's Slurm jobs only: other daemons may share the cluster.
        try:
            instance = read_text(os.path.join(self.data, "slurm-instance")).strip()
            r = subprocess.run(["squeue", "-h", "-o", "%i|%k"], capture_output=True, text=True)
            ids = [l.split("|")[0] for l in r.stdout.split() if l.endswith(":" + instance)]
            if ids:
                subprocess.run(["scancel"] + ids, check=False)
        except OSError:
            pass
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
    def test_ddp_example_runs_as_one_chief_and_two_workers(self):
        example = os.path.join(SOURCE, "examples", "ddp")
        if not os.path.isdir(os.path.join(example, "trainer")):
            self.skipTest("examples/ddp is not there")
        self.stoker("storage", "mb", "gs://ddp")
        r = self.stoker("jobs", "submit", "--config", os.path.join(example, "job.yaml"),
                        "--package-path", os.path.join(example, "trainer"),
                        "--module-name", "trainer.task", "--follow", check=False, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-2000:])
        self.assertRegex(r.stdout, r"final val_loss=0\.02")


if __name__ == "__main__":
    unittest.main(verbosity=2)
