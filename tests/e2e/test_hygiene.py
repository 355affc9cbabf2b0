"""Hygiene (issue #7): bounded logs, true log tails, no process left behind,
retention of finished replica directories."""
import glob
import json
import os
import time

from harness import StokerTestCase, container_job, pid_alive, wait_for

MAX_BYTES = 65536
MAX_FILES = 2

# A trainer that writes as fast as it can for two seconds, then a last line.
def read(path):
    with open(path) as f:
        return f.read()


FLOOD = ("timeout 2 yes 'a log line from a trainer that writes as fast as it can' || true; "
         "echo THE-LAST-LINE")


class RotationTest(StokerTestCase):
    config = StokerTestCase.config + "log_max_bytes: %d\nlog_max_files: %d\n" % (MAX_BYTES,
                                                                               MAX_FILES)

    def log_files(self, job_id):
        return glob.glob(os.path.join(self.replica_dir(job_id), "output.log*"))

    def assert_logs_bounded(self, job_id):
        files = self.log_files(job_id)
        total = sum(os.path.getsize(f) for f in files)
        self.assertLessEqual(total, MAX_BYTES * (MAX_FILES + 1), files)
        self.assertLessEqual(len(files), MAX_FILES + 1, files)
        for f in files:
            self.assertLessEqual(os.path.getsize(f), MAX_BYTES, f)
        return files

    def test_a_flooding_trainer_succeeds_with_bounded_logs_and_its_last_line_shown(self):
        job_id = self.submit(container_job("flood", FLOOD))
        job = self.wait_state(job_id, timeout=90)
        self.assertEqual(job["state"], "JOB_STATE_SUCCEEDED", job)
        files = self.assert_logs_bounded(job_id)
        self.assertIn(os.path.join(self.replica_dir(job_id), "output.log.%d" % MAX_FILES), files)
        out = self.stoker("jobs", "logs", job_id).stdout
        self.assertTrue(out.endswith("THE-LAST-LINE\n"), out[-300:])
        # The whole log is served oldest file first, and says what rotation deleted.
        self.assertTrue(out.startswith("stoker: "), out[:300])
        self.assertIn("deleted by log rotation", out.splitlines()[0])
        body = out.split("\n", 1)[1]
        self.assertGreater(len(body), MAX_BYTES * MAX_FILES)
        self.assertLessEqual(len(body), MAX_BYTES * (MAX_FILES + 1))

    def test_a_failing_trainer_quotes_its_true_last_lines_after_rotation(self):
        script = ("seq 1 100000 | sed 's/^/step /'; "
                  "echo 'ValueError: the true last line' >&2; exit 3")
        job_id = self.submit(container_job("flood-fail", script))
        job = self.wait_state(job_id, timeout=90)
        self.assertEqual(job["state"], "JOB_STATE_FAILED")
        msg = job["error"]["message"]
        self.assertIn("non-zero status of 3", msg)
        self.assertTrue(msg.endswith("step 99998\nstep 99999\nstep 100000\n"
                                     "ValueError: the true last line\n"), msg[-300:])
        self.assert_logs_bounded(job_id)

    def test_cancel_stops_forked_writers_that_ignore_sigterm_and_hold_the_log(self):
        pids = os.path.join(self.tmp, "pids")
        script = ("trap '' TERM; "
                  "(trap '' TERM; while :; do echo child-noise; done) & echo $! >> %s; "
                  "setsid sh -c 'trap \"\" TERM; while :; do echo escaped; sleep 0.01; done' & "
                  "echo $! >> %s; echo $$ >> %s; wait" % (pids, pids, pids))
        job_id = self.submit(container_job("stubborn-writers", script))
        wait_for(lambda: os.path.exists(pids) and len(read(pids).split()) == 3, 30,
                 "the trainer to start its children")
        wait_for(lambda: self.job(job_id)["state"] == "JOB_STATE_RUNNING", 30, "RUNNING")
        wait_for(lambda: len(self.log_files(job_id)) > 1, 30, "the log to rotate")
        self.stoker("jobs", "cancel", job_id)
        job = self.wait_state(job_id, timeout=30)
        self.assertEqual(job["state"], "JOB_STATE_CANCELLED")
        for pid in map(int, read(pids).split()):
            wait_for(lambda: not pid_alive(pid), 10, "process %d to be gone" % pid)
        status = json.loads(read(os.path.join(self.replica_dir(job_id), "status.json")))
        self.assertEqual(status["state"], "cancelled")
        self.assert_logs_bounded(job_id)
        self.assertIn("child-noise", self.stoker("jobs", "logs", job_id).stdout)


class RetentionTest(StokerTestCase):
    config = StokerTestCase.config + (
        "retention: {replica_dirs_days: 0, max_finished_replica_dirs: 100, "
        "scan_interval_seconds: 0.05}\n")

    def test_finished_replica_dirs_are_removed_and_logs_say_so_but_outputs_stay(self):
        job_id = self.submit(container_job(
            "kept-output", "echo hello; mkdir -p $AIP_MODEL_DIR; echo model > $AIP_MODEL_DIR/model.txt"))
        running = self.submit(container_job("still-running", "echo waiting; sleep 1000"))
        job = self.wait_state(job_id)
        self.assertEqual(job["state"], "JOB_STATE_SUCCEEDED")
        job_dir = os.path.join(self.data, "jobs", job_id)
        wait_for(lambda: not os.path.exists(job_dir), 30, "retention to remove " + job_dir)
        # Outputs in buckets are never touched.
        output = os.path.join(self.data, "buckets", "stoker-outputs", job_id, "model",
                              "model.txt")
        self.assertTrue(os.path.exists(output), output)
        r = self.stoker("jobs", "logs", job_id)
        self.assertIn("removed by the retention policy", r.stdout)
        self.assertNotIn("hello", r.stdout)
        # A running job keeps its directory.
        wait_for(lambda: self.job(running)["state"] == "JOB_STATE_RUNNING", 30, "RUNNING")
        self.assertTrue(os.path.isdir(self.replica_dir(running)))
        # RUNNING means the trainer was started, not that it has printed yet.
        wait_for(lambda: "waiting" in self.stoker("jobs", "logs", running).stdout, 30,
                 "the running job's log line")
        self.stoker("jobs", "cancel", running)
        self.wait_state(running)
        wait_for(lambda: not os.path.exists(os.path.join(self.data, "jobs", running)), 30,
                 "retention to remove the cancelled job's directory")


if __name__ == "__main__":
    import unittest
    unittest.main()
