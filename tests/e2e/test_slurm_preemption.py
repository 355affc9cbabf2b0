"""Preemption on Slurm (issue #20, docs/slurm.md "Preemption").

A real stokerd with the Slurm executor against a real one-node Slurm that
preempts by partition (scripts/slurm-localhost.sh: partition `low` has
PreemptMode=REQUEUE and GraceTime=30, partition `high` a higher
PriorityTier). Under REQUEUE, Slurm would run a job still running at the
end of the GraceTime again behind Stoker's back if it allowed requeues;
Stoker's jobs are --no-requeue, so Slurm kills it and Stoker starts the next
attempt as a new Slurm job. A preemptible Stoker job (label stoker-preemptible) goes to
`low` (slurm.preemptible_partition); a job in `high` that needs the node
makes Slurm preempt it. The preempted job must get SIGTERM, come back as
attempt 2 with STOKER_RESTART_REASON=preemption and the same
AIP_CHECKPOINT_DIR, and succeed although it has no retries left: a
preemption is not a failure.

Skipped without STOKER_TEST_SLURM=1, as the Slurm half of the executor
contract suite; with it, a Slurm that does not answer fails the test. CI
runs it after scripts/slurm-localhost.sh (.ci/run).

Run: STOKER_TEST_SLURM=1 python3 tests/e2e/test_slurm_preemption.py
"""
import os
import signal
import subprocess

from harness import (DEFAULT_CONFIG, Daemon, StokerTestCase, cancel_slurm_jobs_of, main,
                     read_text, slurm_jobs_of, wait_for)
from test_executor_contract import job_of, parse_env, pool, require_slurm, squeue


def node_cpus():
    """The CPUs of the one Slurm node (what slurm-localhost.sh declared)."""
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%c"], capture_output=True, text=True,
                         check=True).stdout.split()
    return int(out[0])


class SlurmPreemptionTest(StokerTestCase):

    def setUp(self):
        require_slurm(self)
        parts = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True).stdout
        if not {"low", "high"} <= set(parts.split()):
            self.fail("Slurm has no partitions low and high (partitions: %s); start it with "
                      "scripts/slurm-localhost.sh" % " ".join(parts.split()))
        # Sizes from the node: the preemptible gang (two `half` replicas) and
        # the `big` job cannot run at once, each fits alone.
        cpus = node_cpus()
        half, big = cpus // 4 + 1, cpus // 2 + 1
        # Stoker caps a replica's ask at what its own node has (the
        # inventory), also when Slurm places it: declare the Slurm node's CPUs.
        self.config = (DEFAULT_CONFIG +
                       "inventory: {cpus: %d, memory_gb: 16, gpus: []}\n" % cpus +
                       "machine_types: {half: {vcpus: %d, memory_gb: 1}, "
                       "big: {vcpus: %d, memory_gb: 1}}\n" % (half, big) +
                       "executor: slurm\n"
                       "slurm: {grace_seconds: 5, preemptible_partition: low}\n")
        super().setUp()

    def tearDown(self):
        cancel_slurm_jobs_of(self.data)  # this daemon's Slurm jobs only
        super().tearDown()

    def out(self, *parts):
        d = os.path.join(self.tmp, "out")
        os.makedirs(d, exist_ok=True)
        return os.path.join(d, *parts)

    def slurm_jobs(self, job_id, attempt):
        """This daemon's Slurm jobs (any state Slurm remembers) for one attempt (0-based)."""
        return slurm_jobs_of(self.data, ["-t", "all", "--name", "stoker-%s-%d" % (job_id, attempt)])

    def diagnose(self, job_id):
        """What the job, its events, Slurm and stokerd say: for a failure message."""
        status, e = self.api("GET", self.project_path + "/" + job_id + "/events")
        log = read_text(os.path.join(self.data, "stokerd.test.log"))
        return "job: %s\nevents: %s\nsqueue: %s\nstokerd log (end):\n%s" % (
            self.job(job_id), e, squeue("-t", "all", "-O", "JobID:0|,Name:0|,Partition:0|,"
                                        "State:0|,Reason:0|,PreemptTime:0"), log[-3000:])

    def wait_final(self, job_id, timeout):
        try:
            return self.wait_state(job_id, timeout=timeout)
        except AssertionError as e:
            raise AssertionError("%s\n%s" % (e, self.diagnose(job_id)))

    def trainer(self):
        """Attempt 1 records its environment, runs until SIGTERM, then saves a
        checkpoint and exits 143. A later attempt records its environment,
        and that it found the checkpoint, and exits 0."""
        out = self.out()
        return (
            "env > {o}/env-$RANK-$STOKER_ATTEMPT.tmp && mv {o}/env-$RANK-$STOKER_ATTEMPT.tmp "
            "{o}/env-$RANK-$STOKER_ATTEMPT; "
            "if [ \"$STOKER_ATTEMPT\" = 1 ]; then "
            "  trap 'echo saved > \"$AIP_CHECKPOINT_DIR/ckpt-$RANK\"; echo TERM > {o}/term-$RANK; "
            "exit 143' TERM; "
            "  echo $$ > {o}/running-$RANK; while :; do sleep 0.2; done; "
            "fi; "
            "cat \"$AIP_CHECKPOINT_DIR/ckpt-$RANK\" > {o}/resumed-$RANK".format(o=out))

    def test_a_preempted_job_gets_sigterm_and_resumes_as_attempt_2_without_using_a_retry(self):
        spot = job_of("spot", [pool(self.trainer(), 1, "half"), pool(self.trainer(), 1, "half")],
                      labels={"stoker-preemptible": "true"})
        spot["jobSpec"]["scheduling"] = {"maxRetries": 0}
        job_id = self.submit(spot)
        wait_for(lambda: all(os.path.exists(self.out("running-%d" % r)) for r in (0, 1)), 90,
                 "both replicas of the preemptible job to start")
        wait_for(lambda: self.job(job_id)["state"] == "JOB_STATE_RUNNING", 30, "RUNNING")
        first = self.slurm_jobs(job_id, 0)
        self.assertEqual(len(first), 1, first)
        self.assertEqual(squeue("-t", "all", "-j", first[0], "-o", "%P"), "low")

        # A job in the higher tier that needs the node: Slurm preempts.
        high = self.submit(job_of("high", [pool("echo ran > %s" % self.out("high"), 1, "big")],
                                  labels={"slurm-partition": "high"}))
        final = self.wait_final(high, timeout=120)
        self.assertEqual(final["state"], "JOB_STATE_SUCCEEDED", final.get("error"))
        job = self.wait_final(job_id, timeout=120)
        self.assertEqual(job["state"], "JOB_STATE_SUCCEEDED", job.get("error"))

        # Both replicas (the whole gang) got SIGTERM and saved a checkpoint.
        for r in (0, 1):
            self.assertTrue(os.path.exists(self.out("term-%d" % r)), "replica %d got no SIGTERM" % r)
            self.assertEqual(read_text(self.out("resumed-%d" % r)).strip(), "saved")
        # Slurm preempted the first attempt's job (it has a PreemptTime) and
        # did not requeue it; the second attempt is a Slurm job of its own,
        # again where it may be preempted.
        when = squeue("-t", "all", "-j", first[0], "-O", "PreemptTime:0")
        self.assertNotIn(when, ("", "N/A", "None"), "Slurm job %s was not preempted" % first[0])
        second = self.slurm_jobs(job_id, 1)
        self.assertEqual(len(second), 1, second)
        self.assertNotEqual(second, first)
        self.assertEqual(squeue("-t", "all", "-j", second[0], "-o", "%P"), "low")
        self.assertEqual(self.slurm_jobs(job_id, 2), [])

        # Attempt 2 knows it is one, and why; both see one checkpoint directory.
        for r in (0, 1):
            one = parse_env(read_text(self.out("env-%d-1" % r)))
            two = parse_env(read_text(self.out("env-%d-2" % r)))
            self.assertNotIn("STOKER_RESTART_REASON", one)
            self.assertEqual(two["STOKER_ATTEMPT"], "2")
            self.assertEqual(two["STOKER_RESTART_REASON"], "preemption")
            self.assertTrue(one["AIP_CHECKPOINT_DIR"])
            self.assertEqual(one["AIP_CHECKPOINT_DIR"], two["AIP_CHECKPOINT_DIR"])

        # The job says so: attempt 2 after one preemption, with Slurm's words
        # in its events; no retry was used (maxRetries 0, yet it succeeded).
        st = job["stoker"]
        self.assertEqual((st["attempt"], st.get("preemptions"), st.get("restartReason")),
                         (1, 1, "preemption"), st)
        self.assertEqual(job["jobSpec"]["scheduling"].get("maxRetries", 0), 0)
        status, e = self.api("GET", self.project_path + "/" + job_id + "/events")
        self.assertEqual(status, 200, e)
        reasons = [ev["reason"] for ev in e.get("events", [])]
        said = [r for r in reasons if "preempted by Slurm" in r]
        self.assertTrue(said, reasons)
        self.assertIn("partition low", said[0])

    def test_a_trainer_that_outlives_the_grace_time_is_killed_by_slurm_and_still_resumes(self):
        # stoker-run would wait 120 s for its trainer; Slurm's GraceTime (30 s)
        # ends first: Slurm kills the supervisors too, which leave no status.
        self.daemon.kill(signal.SIGTERM)
        self.config = self.config.replace("cancel_grace_seconds: 1\n",
                                          "cancel_grace_seconds: 120\n")
        self.daemon = Daemon(self.data, self.config).start()
        out = self.out()
        stubborn = ("if [ \"$STOKER_ATTEMPT\" = 1 ]; then trap '' TERM; echo $$ > {o}/running; "
                    "while :; do sleep 0.2; done; fi; echo $STOKER_RESTART_REASON > {o}/second"
                    ).format(o=out)
        job_id = self.submit(job_of("stubborn", [pool(stubborn, 1, "big")],
                                    labels={"stoker-preemptible": "true"}))
        wait_for(lambda: os.path.exists(self.out("running")), 90, "the preemptible job to start")
        first = wait_for(lambda: self.slurm_jobs(job_id, 0), 30, "its Slurm job")
        high = self.submit(job_of("high", [pool("true", 1, "big")],
                                  labels={"slurm-partition": "high"}))
        # GraceTime, plus up to half a minute until slurmctld's periodic
        # check acts on it, plus both jobs' own time.
        self.assertEqual(self.wait_final(high, timeout=150)["state"], "JOB_STATE_SUCCEEDED")
        job = self.wait_final(job_id, timeout=90)
        self.assertEqual(job["state"], "JOB_STATE_SUCCEEDED", job.get("error"))
        self.assertEqual(read_text(self.out("second")).strip(), "preemption")
        st = job["stoker"]
        self.assertEqual((st["attempt"], st.get("preemptions")), (1, 1), st)
        # Killed at the end of the GraceTime and not requeued by Slurm (the
        # partition's PreemptMode is REQUEUE): it ended PREEMPTED for good.
        self.assertEqual(squeue("-t", "all", "-j", first[0], "-o", "%T"), "PREEMPTED")
        self.assertEqual(len(self.slurm_jobs(job_id, 1)), 1)


if __name__ == "__main__":
    main()
