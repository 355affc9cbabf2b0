"""Preemption with checkpoints (issue #20, docs/preemption.md), end to end
against the real daemon, local executor and processes: a preemptible job
that a higher-priority job preempts twice resumes from its checkpoints as
the same job and ends with the model of an uninterrupted run; a victim that
ignores SIGTERM is killed after the grace; bad preemption config is refused
naming the key.

The node declares one GPU (inventory), so that two one-GPU jobs cannot run
together on any machine; nothing here touches a real GPU.
"""
import calendar
import json
import os
import re
import time

from harness import (DEFAULT_CONFIG, IMAGE, SOURCE, StokerTestCase, container_job,
                     read_text, stokerd_refuses, wait_for)
from test_checkpoint_example import (EVERY, PYTHON, STEPS, require_torch, uninterrupted,
                                     parse)

GRACE = 5

CONFIG = DEFAULT_CONFIG + """
inventory: {cpus: 8, memory_gb: 16, gpus: [{type: NVIDIA_TESLA_T4, memory_gb: 16}]}
preemption:
  enabled: true
  priority_margin: 10
  grace_seconds: %d
  min_run_seconds: 0
""" % GRACE


def gpu_machine():
    return {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4",
            "acceleratorCount": 1}


class PreemptionTest(StokerTestCase):
    config = CONFIG

    def events(self, job_id):
        return [e["reason"] for e in
                self.api("GET", self.project_path + "/" + job_id + "/events")[1]["events"]]

    def attempt_log(self, job_id, attempt):
        """The replica log of one attempt (0-based), as the replica dir keeps it."""
        parts = [self.data, "jobs", job_id] + (["attempt-%d" % attempt] if attempt else []) + \
            ["workerpool0-0", "output.log"]
        path = os.path.join(*parts)
        return read_text(path) if os.path.exists(path) else ""

    def high_job(self, name, seconds):
        job = container_job(name, "echo high; sleep %d" % seconds)
        job["jobSpec"]["workerPoolSpecs"][0]["machineSpec"] = gpu_machine()
        job["jobSpec"]["scheduling"] = {"priority": 50}
        return job

    def preempt_once(self, low_id, expect_preemptions, name):
        """Submits a high-priority one-GPU job, waits for it to preempt the
        low job and finish; returns seconds from its submit to its start."""
        high_id = self.submit(self.high_job(name, 2))
        wait_for(lambda: self.job(low_id)["stoker"].get("preemptions") == expect_preemptions, 30,
                 "the low job to be preempted")
        high = self.wait_state(high_id, timeout=90)
        self.assertEqual(high["state"], "JOB_STATE_SUCCEEDED", high)
        events = self.events(low_id)
        self.assertTrue(any(e.startswith("PREEMPTED by job %s (user " % high_id) and
                            "priority 50" in e for e in events), events)
        self.assertTrue(any("preempting job " + low_id in e for e in self.events(high_id)))
        return high_id

    def test_a_spot_job_preempted_twice_resumes_and_ends_with_the_uninterrupted_model(self):
        require_torch(self)
        _, reference = uninterrupted()
        low = {"displayName": "low",
               "jobSpec": {
                   "workerPoolSpecs": [{
                       "machineSpec": gpu_machine(), "replicaCount": 1,
                       "pythonPackageSpec": {
                           "executorImageUri": IMAGE, "packageUris": [],
                           "pythonModule": "trainer.task",
                           "args": ["--steps=%d" % STEPS, "--checkpoint-every=%d" % EVERY,
                                    "--sleep-per-step=0.1"]}}],
                   "scheduling": {"strategy": "SPOT", "maxRetries": 0}}}
        spec = self.write("low.json", json.dumps(low))
        r = self.stoker("jobs", "submit", "--config", spec, "--package-path",
                        os.path.join(SOURCE, "examples", "checkpointing", "trainer"),
                        "--module-name", "trainer.task")
        low_id = re.search(r"Submitted job (\d+)", r.stdout + r.stderr).group(1)

        starts = []
        for n in (1, 2):
            # Let it train past a checkpoint in this attempt, then preempt it.
            wait_for(lambda: len(re.findall(r"^step \d+ ", self.attempt_log(low_id, n - 1),
                                            re.M)) > EVERY + 3, 120,
                     "attempt %d to train some steps" % n)
            high_id = self.preempt_once(low_id, n, "high-%d" % n)
            high = self.job(high_id)
            starts.append((high_id, high))
        final = self.wait_state(low_id, timeout=180)
        self.assertEqual(final["state"], "JOB_STATE_SUCCEEDED", final)
        self.assertEqual(final["stoker"]["preemptions"], 2)
        self.assertEqual(final["stoker"]["attempt"], 2)
        self.assertEqual(final["stoker"]["restartReason"], "preemption")

        # Each restart resumed where the last checkpoint was, redoing at most
        # one checkpoint interval, and the model is the uninterrupted one.
        done = set()
        for attempt in range(3):
            log = self.attempt_log(low_id, attempt).splitlines()
            start, losses, digest = parse(log)
            steps = [s for s, _ in losses]
            self.assertTrue(steps, "attempt %d trained nothing:\n%s" % (attempt, "\n".join(log)))
            if attempt:
                self.assertIn("attempt %d (restart reason: preemption)" % (attempt + 1),
                              "\n".join(log))
                self.assertLessEqual(len(done & set(steps)), EVERY, (attempt, steps))
            done |= set(steps)
        self.assertEqual(done, set(range(1, STEPS + 1)))
        self.assertEqual(digest, reference)
        model = os.path.join(self.data, "buckets", "stoker-outputs")
        written = [os.path.join(d, f) for d, _, fs in os.walk(model) for f in fs
                   if f == "weights_sha256.txt"]
        self.assertEqual([read_text(p).strip() for p in written], [reference])

        # The preempting job started within the grace period (plus a second
        # or two for the loop, the scheduler and a loaded CI machine).
        for high_id, high in starts:
            waited = _seconds(high["startTime"]) - _seconds(high["createTime"])
            self.assertLess(waited, GRACE + 10, (high_id, high))
        describe = self.stoker("jobs", "describe", low_id).stdout
        self.assertIn("attempt:  3 (restarted after a preemption); preempted 2 times", describe)

    def test_a_victim_that_ignores_sigterm_is_killed_after_the_grace(self):
        low = container_job("stubborn", "trap '' TERM; echo started; "
                                        "while true; do sleep 1; done")
        low["labels"] = {"stoker-preemptible": "true"}
        low["jobSpec"]["workerPoolSpecs"][0]["machineSpec"] = gpu_machine()
        low_id = self.submit(low)
        wait_for(lambda: "started" in self.attempt_log(low_id, 0), 30, "the stubborn job")
        high_id = self.submit(self.high_job("urgent", 1))
        high = self.wait_state(high_id, timeout=60)
        self.assertEqual(high["state"], "JOB_STATE_SUCCEEDED", high)
        waited = _seconds(high["startTime"]) - _seconds(high["createTime"])
        self.assertGreaterEqual(waited, GRACE - 0.5)  # it waited out the grace ...
        self.assertLess(waited, GRACE + 10)            # ... and not much more
        status = json.loads(read_text(os.path.join(self.replica_dir(low_id), "status.json")))
        self.assertIn("SIGKILL after %ds grace" % GRACE, status["message"])
        # Requeued, not failed: it runs again once the GPU is free.
        wait_for(lambda: "started" in self.attempt_log(low_id, 1), 30, "the second attempt")
        self.wait_state(low_id, states=("JOB_STATE_RUNNING",))
        self.stoker("jobs", "cancel", low_id)
        self.assertEqual(self.wait_state(low_id, timeout=60)["state"], "JOB_STATE_CANCELLED")

    def test_a_job_that_is_not_preemptible_or_not_lower_by_the_margin_is_never_preempted(self):
        for name, labels, priority in (("pinned", {}, 0), ("close", {"stoker-preemptible": "true"},
                                                             45)):
            low = container_job(name, "echo started; sleep 600")
            low["labels"] = labels
            low["jobSpec"]["workerPoolSpecs"][0]["machineSpec"] = gpu_machine()
            low["jobSpec"]["scheduling"] = {"priority": priority}
            low_id = self.submit(low)
            wait_for(lambda: "started" in self.attempt_log(low_id, 0), 30, "the low job")
            high_id = self.submit(self.high_job("blocked-" + name, 1))
            time.sleep(3)
            self.assertEqual(self.job(low_id)["state"], "JOB_STATE_RUNNING")
            self.assertNotIn("preemptions", self.job(low_id)["stoker"])
            self.assertEqual(self.job(high_id)["state"], "JOB_STATE_QUEUED")
            self.stoker("jobs", "cancel", high_id)
            self.stoker("jobs", "cancel", low_id)
            self.wait_state(low_id)


def _seconds(rfc3339):
    """Seconds since the epoch of an RFC 3339 UTC time with fractions."""
    m = re.match(r"(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)(\.\d+)?Z", rfc3339)
    y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
    return calendar.timegm((y, mo, d, h, mi, s)) + float(m.group(7) or 0)


class CheckpointDirTest(StokerTestCase):
    def test_a_checkpoint_dir_that_cannot_be_made_fails_the_job_naming_it(self):
        self.stoker("storage", "mb", "gs://out")
        blocker = os.path.join(self.data, "buckets", "out", "run", "checkpoints")
        os.makedirs(os.path.dirname(blocker))
        with open(blocker, "w") as f:
            f.write("a file where the directory should be\n")
        job = container_job("blocked", "echo should not run")
        job["jobSpec"]["baseOutputDirectory"] = {"outputUriPrefix": "gs://out/run/"}
        final = self.wait_state(self.submit(job))
        self.assertEqual(final["state"], "JOB_STATE_FAILED", final)
        message = final["error"]["message"]
        self.assertIn("AIP_CHECKPOINT_DIR", message)
        self.assertIn("checkpoints cannot be made", message)
        self.assertIn("set jobSpec.baseOutputDirectory to a writable place", message)


class PreemptionConfigTest(StokerTestCase):
    def test_bad_preemption_config_is_refused_naming_the_key(self):
        err = stokerd_refuses(os.path.join(self.tmp, "bad1"),
                              DEFAULT_CONFIG + "preemption: {priority_margin: 0}\n")
        self.assertIn("preemption.priority_margin: must be at least 1", err)
        err = stokerd_refuses(os.path.join(self.tmp, "bad2"),
                              DEFAULT_CONFIG + "preemption: {grace: 30}\n")
        self.assertIn("preemption.grace: unknown key (known: enabled, priority_margin, "
                      "grace_seconds", err)
        status, body = self.api("POST", self.project_path,
                                dict(container_job("x", "true"),
                                     labels={"stoker-preemptible": "maybe"}))
        self.assertEqual(status, 400, body)
        self.assertIn("labels.stoker-preemptible: must be \"true\" or \"false\"",
                      body["error"]["message"])


if __name__ == "__main__":
    import unittest
    unittest.main()
