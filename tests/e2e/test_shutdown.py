"""Shutdown (issue #7): SIGTERM stops stokerd cleanly and leaves replicas
running for the next daemon; a rolling restart never disturbs training."""
import json
import os
import signal

from harness import IMAGE, Daemon, StokerTestCase, container_job, read_text, wait_for

# Records every catchable stop signal it receives instead of dying of it, so
# that any signal from a restart shows up in the file.
TRAINER = ("for s in TERM INT HUP QUIT USR1 USR2 PIPE; do trap \"echo $s $$ >> {sigs}\" $s; done; "
           "echo \"start $CLOUD_ML_JOB_ID $$\" >> {starts}; "
           "while [ ! -e {gate} ]; do sleep 0.05; done; echo \"trainer done\"; {then}")
# The job ends, and stops the replicas still running, when the chief exits.
# So the chief ends last: each worker's last act is to leave its pid, and the
# chief waits until both workers' processes are gone.
WORKER_THEN = "echo $$ >> {ends}"
CHIEF_THEN = ("while [ \"$(cat {ends} 2>/dev/null | wc -l)\" -lt 2 ]; do sleep 0.05; done; "
              "for p in $(cat {ends}); do while kill -0 $p 2>/dev/null; do sleep 0.05; done; done")


class ShutdownTest(StokerTestCase):

    def test_sigterm_exits_zero_and_leaves_no_stale_addr_or_pid(self):
        gate = os.path.join(self.tmp, "gate")
        job_id = self.submit(container_job("long", "while [ ! -e %s ]; do sleep 0.05; done" % gate))
        wait_for(lambda: self.job(job_id)["state"] == "JOB_STATE_RUNNING", 30, "RUNNING")
        pid = self.daemon.proc.pid
        self.assertEqual(read_text(os.path.join(self.data, "stokerd.pid")).strip(), str(pid))
        self.daemon.kill(signal.SIGTERM)
        self.assertEqual(self.daemon.proc.returncode, 0)
        self.assertFalse(os.path.exists(os.path.join(self.data, "stokerd.addr")))
        # No stale pid for `kill $(cat stokerd.pid)` to hit another process with.
        self.assertEqual(read_text(os.path.join(self.data, "stokerd.pid")), "")
        self.assertIn("running replicas keep running", read_text(self.daemon.log.name))
        self.daemon = Daemon(self.data, self.config).start()
        self.assertEqual(self.job(job_id)["state"], "JOB_STATE_RUNNING")
        open(gate, "w").close()
        self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")

    def test_rolling_restarts_never_disturb_a_multi_replica_job(self):
        sigs, starts, gate, ends = (os.path.join(self.tmp, n) for n in ("sigs", "starts", "gate", "ends"))
        files = dict(sigs=sigs, starts=starts, gate=gate)
        chief = TRAINER.format(then=CHIEF_THEN.format(ends=ends), **files)
        script = TRAINER.format(then=WORKER_THEN.format(ends=ends), **files)
        worker = {"machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 2,
                  "containerSpec": {"imageUri": IMAGE, "command": ["/bin/sh", "-c", script]}}
        job_id = self.submit(container_job("dist", chief, pools=[worker]))
        wait_for(lambda: os.path.exists(starts) and len(read_text(starts).splitlines()) == 3, 30,
                 "three replicas to start")
        wait_for(lambda: self.job(job_id)["state"] == "JOB_STATE_RUNNING", 30, "RUNNING")
        trainers = [int(line.split()[2]) for line in read_text(starts).splitlines()]
        for round_ in range(4):
            self.daemon.kill(signal.SIGTERM)
            self.assertEqual(self.daemon.proc.returncode, 0, "round %d" % round_)
            for pid in trainers:
                self.assertTrue(os.path.exists("/proc/%d" % pid), "trainer %d died" % pid)
            self.daemon = Daemon(self.data, self.config).start()
            self.assertEqual(self.job(job_id)["state"], "JOB_STATE_RUNNING")
        open(gate, "w").close()
        job = self.wait_state(job_id)
        self.assertEqual(job["state"], "JOB_STATE_SUCCEEDED", job.get("error"))
        self.assertFalse(os.path.exists(sigs) and read_text(sigs),
                         "a trainer got a signal: %s" % (os.path.exists(sigs) and read_text(sigs)))
        # Each replica ran once, and each ran to its end.
        self.assertEqual(len(read_text(starts).splitlines()), 3)
        for replica in ("workerpool0-0", "workerpool1-0", "workerpool1-1"):
            log = read_text(os.path.join(self.replica_dir(job_id, replica), "output.log"))
            self.assertIn("trainer done", log, replica)
            status = json.load(open(os.path.join(self.replica_dir(job_id, replica), "status.json")))
            self.assertEqual(status["state"], "exited", (replica, status))
