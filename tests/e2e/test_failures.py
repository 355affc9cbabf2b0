"""Failures, timeouts and cancellation end in the right state with a reason."""
import os
import re
import time

from harness import StokerTestCase, container_job, pid_alive, read_text, wait_for


class FailuresTest(StokerTestCase):
    config = StokerTestCase.config + "inventory: {gpus: [{type: NVIDIA_TESLA_T4}]}\n"

    def test_nonzero_exit_fails_naming_replica_code_and_log_tail(self):
        job_id = self.submit(container_job("boom", "echo preparing; echo 'bad things' >&2; exit 3"))
        job = self.wait_state(job_id)
        self.assertEqual(job["state"], "JOB_STATE_FAILED")
        msg = job["error"]["message"]
        self.assertIn("workerpool0-0", msg)
        self.assertIn("non-zero status of 3", msg)
        self.assertTrue(msg.rstrip().endswith("bad things"), msg)
        # No retry by default (scheduling.maxRetries defaults to 0): one attempt, one run.
        self.assertEqual(job["stoker"]["attempt"], 0)
        events = self.api("GET", self.project_path + "/" + job_id + "/events")[1]["events"]
        self.assertEqual([e["to"] for e in events].count("JOB_STATE_RUNNING"), 1, events)
        self.assertFalse(any("Restarting" in e["reason"] for e in events), events)
        r = self.stoker("jobs", "submit", "--config",
                        self.write("j.json", __import__("json").dumps(container_job("b2", "exit 5"))),
                        "--follow", check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("non-zero status of 5", r.stdout)

    def test_killed_by_a_signal_names_the_signal(self):
        job_id = self.submit(container_job("sig", "kill -9 $$"))
        job = self.wait_state(job_id)
        self.assertEqual(job["state"], "JOB_STATE_FAILED")
        self.assertIn("SIGKILL", job["error"]["message"])

    def test_timeout_fails_the_job_and_says_so(self):
        job_id = self.submit(container_job("slow", "echo start; sleep 30", timeout="1s"))
        job = self.wait_state(job_id, timeout=30)
        self.assertEqual(job["state"], "JOB_STATE_FAILED")
        self.assertIn("scheduling.timeout of 1s", job["error"]["message"])
        self.assertEqual(job["error"]["code"], 4)

    def test_cancel_stops_the_whole_process_group_even_when_sigterm_is_ignored(self):
        pids = os.path.join(self.tmp, "pids")
        script = ("trap '' TERM; (trap '' TERM; sleep 1000) & echo $! >> %s; "
                  "setsid sleep 1000 & echo $! >> %s; echo $$ >> %s; wait" % (pids, pids, pids))
        job_id = self.submit(container_job("stubborn", script))
        wait_for(lambda: os.path.exists(pids) and len(read_text(pids).split()) == 3, 30,
                 "the trainer to start its children")
        wait_for(lambda: self.job(job_id)["state"] == "JOB_STATE_RUNNING", 30, "RUNNING")
        r = self.stoker("jobs", "cancel", job_id)
        self.assertIn("Cancel requested", r.stdout)
        job = self.wait_state(job_id, timeout=30)
        self.assertEqual(job["state"], "JOB_STATE_CANCELLED")
        self.assertEqual(job["error"]["code"], 1)
        for pid in map(int, read_text(pids).split()):
            wait_for(lambda: not pid_alive(pid), 10, "process %d to be gone" % pid)
        d = self.stoker("jobs", "describe", job_id).stdout
        self.assertIn("RUNNING -> CANCELLING", d)
        self.assertIn("CANCELLING -> CANCELLED", d)

    def test_cancel_of_a_queued_job_never_starts_it_and_cancel_twice_is_refused(self):
        blocker = self.submit(container_job("big", "sleep 1000", accelerator=("NVIDIA_TESLA_T4", 1)))
        wait_for(lambda: self.job(blocker)["state"] == "JOB_STATE_RUNNING", 30, "blocker to run")
        queued = self.submit(container_job("queued", "touch %s/started" % self.tmp,
                                           accelerator=("NVIDIA_TESLA_T4", 1)))
        self.assertEqual(self.job(queued)["state"], "JOB_STATE_QUEUED")
        self.stoker("jobs", "cancel", queued)
        self.assertEqual(self.wait_state(queued)["state"], "JOB_STATE_CANCELLED")
        r = self.stoker("jobs", "cancel", queued, check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("already ended", r.stderr)
        self.stoker("jobs", "cancel", blocker)
        self.assertEqual(self.wait_state(blocker)["state"], "JOB_STATE_CANCELLED")
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "started")))
        r = self.stoker("jobs", "cancel", "12345", check=False)
        self.assertEqual(r.returncode, 3)
