"""Failure semantics (issue #5): retries of the whole gang (maxRetries,
restartJobOnWorkerRestart, disableRetries) and hung replicas reported."""
import os
import time

from harness import IMAGE, StokerTestCase, container_job, read_text, wait_for


class RetryTest(StokerTestCase):
    config = StokerTestCase.config + """
hang_timeout_seconds: 2
"""

    def events(self, job_id):
        return [e["reason"] for e in
                self.api("GET", self.project_path + "/" + job_id + "/events")[1]["events"]]

    def counting_job(self, name, fail_times, scheduling, worker_fails=False):
        """Each run appends to a file; the first `fail_times` runs of the
        failing replica exit 3."""
        runs = os.path.join(self.tmp, name + ".runs")
        fail = ('n=$(grep -c . %s); if [ "$n" -le %d ]; then echo "run $n fails"; exit 3; fi; '
                % (runs, fail_times))
        chief = "echo chief-$RANK >> %s; " % runs + ("sleep 1; " if worker_fails else fail) + \
            "echo ok"
        worker_pools = []
        if worker_fails:
            worker = "echo worker-$RANK >> %s.worker; " % runs + fail.replace(
                "grep -c . %s" % runs, "grep -c . %s.worker" % runs) + "echo ok"
            worker_pools = [{"machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 1,
                             "containerSpec": {"imageUri": IMAGE,
                                               "command": ["/bin/sh", "-c", worker]}}]
        job = container_job(name, chief, pools=worker_pools)
        job["jobSpec"]["scheduling"] = scheduling
        return job, runs

    def test_max_retries_runs_the_job_again_until_it_succeeds(self):
        job, runs = self.counting_job("flaky", 2, {"maxRetries": 2})
        job_id = self.submit(job)
        final = self.wait_state(job_id)
        self.assertEqual(final["state"], "JOB_STATE_SUCCEEDED", final)
        self.assertEqual(final["stoker"]["attempt"], 2)
        self.assertEqual(len(read_text(runs).split()), 3)
        events = self.events(job_id)
        self.assertTrue(any("exited with a non-zero status of 3" in e and
                            "Restarting all replicas as attempt 2 of 3" in e for e in events), events)
        # The last attempt's log is the one `jobs logs` shows.
        self.assertIn("ok", self.stoker("jobs", "logs", job_id).stdout)

    def test_retries_stop_at_the_limit_and_the_job_fails_with_the_last_error(self):
        job, runs = self.counting_job("broken", 99, {"maxRetries": 1})
        final = self.wait_state(self.submit(job))
        self.assertEqual(final["state"], "JOB_STATE_FAILED")
        self.assertIn("non-zero status of 3", final["error"]["message"])
        self.assertIn("run 2 fails", final["error"]["message"])
        self.assertEqual(len(read_text(runs).split()), 2)

    def test_restart_on_worker_restart_restarts_the_gang_unless_retries_are_disabled(self):
        job, runs = self.counting_job("gang", 1, {"restartJobOnWorkerRestart": True},
                                      worker_fails=True)
        final = self.wait_state(self.submit(job))
        self.assertEqual(final["state"], "JOB_STATE_SUCCEEDED", final)
        self.assertEqual(read_text(runs).split(), ["chief-0", "chief-0"])  # the chief ran again

        job, runs = self.counting_job("no-retries", 1, {"restartJobOnWorkerRestart": True,
                                                        "disableRetries": True, "maxRetries": 5},
                                      worker_fails=True)
        final = self.wait_state(self.submit(job))
        self.assertEqual(final["state"], "JOB_STATE_FAILED")
        self.assertIn("workerpool1-0", final["error"]["message"])
        self.assertEqual(read_text(runs).split(), ["chief-0"])

    def test_a_silent_replica_is_reported_hung_and_then_as_progressing(self):
        job = container_job("quiet", "echo hello; sleep 9; echo more; sleep 7; echo done")
        job_id = self.submit(job)
        wait_for(lambda: any("looks hung" in e for e in self.events(job_id)), 30,
                 "the hung report")
        final = self.wait_state(job_id)
        self.assertEqual(final["state"], "JOB_STATE_SUCCEEDED")
        events = self.events(job_id)
        hung = [e for e in events if "looks hung" in e]
        self.assertIn("workerpool0-0 looks hung: no output or progress for", hung[0])
        self.assertTrue(any("workerpool0-0 made progress again" in e for e in events), events)


if __name__ == "__main__":
    import unittest
    unittest.main()
