"""SIGKILL the daemon while jobs run: nothing is lost, nothing runs twice."""
import os
import signal
import time

from harness import Daemon, StokerTestCase, container_job, read_text, wait_for


class DurabilityTest(StokerTestCase):
    config = StokerTestCase.config + "inventory: {gpus: [{type: NVIDIA_TESLA_T4}]}\n"

    def test_killed_daemon_readopts_running_replicas_and_starts_queued_jobs(self):
        runs = os.path.join(self.tmp, "runs")
        gate = os.path.join(self.tmp, "gate")
        script = "echo {n} >> %s; while [ ! -e %s ]; do sleep 0.05; done; echo done {n}" % (runs, gate)
        # Two GPU jobs: the first runs, the second waits for the GPU.
        first = self.submit(container_job("first", script.format(n="first"), accelerator=("NVIDIA_TESLA_T4", 1)))
        failing = self.submit(container_job("failing", "echo x; while [ ! -e %s ]; do sleep 0.05; done; exit 7" % gate))
        second = self.submit(container_job("second", script.format(n="second"), accelerator=("NVIDIA_TESLA_T4", 1)))
        wait_for(lambda: self.job(first)["state"] == "JOB_STATE_RUNNING", 30, "first to run")
        wait_for(lambda: self.job(failing)["state"] == "JOB_STATE_RUNNING", 30, "failing to run")
        self.assertEqual(self.job(second)["state"], "JOB_STATE_QUEUED")

        self.daemon.kill(signal.SIGKILL)
        # The trainers keep running without the daemon.
        open(gate, "w").close()
        wait_for(lambda: os.path.exists(os.path.join(self.replica_dir(first), "status.json")), 30,
                 "the first trainer to finish while the daemon is down")
        self.daemon = Daemon(self.data, self.config).start()

        self.assertEqual(self.wait_state(first)["state"], "JOB_STATE_SUCCEEDED")
        failed = self.wait_state(failing)
        self.assertEqual(failed["state"], "JOB_STATE_FAILED")
        self.assertIn("non-zero status of 7", failed["error"]["message"])
        self.assertEqual(self.wait_state(second)["state"], "JOB_STATE_SUCCEEDED")
        self.assertEqual(sorted(read_text(runs).split()), ["first", "second"])

    def test_repeated_kills_during_a_stream_of_jobs_lose_nothing(self):
        marks = os.path.join(self.tmp, "marks")
        os.makedirs(marks)
        acked = []
        for round_ in range(3):
            for i in range(5):
                n = "r%d-%d" % (round_, i)
                acked.append(self.submit(container_job(n, "echo %s >> %s/%s" % (n, marks, n))))
            self.daemon.kill(signal.SIGKILL)
            self.daemon = Daemon(self.data, self.config).start()
        for job_id in acked:
            self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")
        # Every acknowledged job ran exactly once.
        names = sorted(os.listdir(marks))
        self.assertEqual(len(names), len(acked))
        for n in names:
            self.assertEqual(read_text(os.path.join(marks, n)).split(), [n])

    def test_sigterm_leaves_replicas_running_for_the_next_daemon(self):
        gate = os.path.join(self.tmp, "gate")
        job_id = self.submit(container_job("long", "while [ ! -e %s ]; do sleep 0.05; done" % gate))
        wait_for(lambda: self.job(job_id)["state"] == "JOB_STATE_RUNNING", 30, "job to run")
        self.daemon.kill(signal.SIGTERM)
        self.assertEqual(self.daemon.proc.returncode, 0)
        trainer = int(__import__("json").load(open(os.path.join(self.replica_dir(job_id), "trainer.json")))["pid"])
        self.assertTrue(os.path.exists("/proc/%d" % trainer))
        self.daemon = Daemon(self.data, self.config).start()
        self.assertEqual(self.job(job_id)["state"], "JOB_STATE_RUNNING")
        open(gate, "w").close()
        self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")
