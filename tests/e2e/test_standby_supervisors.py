"""Supervisors started ahead of their replicas (exec/supervisor_pool.h,
decision 0041): stokerd keeps two `stoker-run --standby` processes waiting;
a launch hands one its replica directory. Real stokerd and stoker-run."""
import glob
import json
import os
import signal

from harness import IMAGE, StokerTestCase, container_job, pid_alive, read_text, wait_for


def standbys_of(daemon_pid):
    """The daemon's children still waiting as standbys."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = read_text("/proc/%s/stat" % entry).rsplit(")", 1)[1].split()
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if int(stat[1]) == daemon_pid and stat[0] != "Z" and args[1:2] == [b"--standby"]:
            found.append(int(entry))
    return sorted(found)


def standby_cgroups(pid):
    """The cgroups a standby supervisor made ahead (StandbyCgroupName,
    src/replica/replica_cgroup.h), in every hierarchy it made one."""
    return sorted(glob.glob("/sys/fs/cgroup/**/stoker/s-%d" % pid, recursive=True))


def can_make_cgroups():
    return os.geteuid() == 0 and os.path.isdir("/sys/fs/cgroup")


class StandbySupervisorsTest(StokerTestCase):
    def test_a_standby_supervises_the_replica_and_shows_its_directory(self):
        daemon = self.daemon.proc.pid
        first = wait_for(lambda: len(standbys_of(daemon)) == 2 and standbys_of(daemon), 30,
                         "two standby supervisors")
        for pid in first:
            # A supervisor loads libarchive only to unpack a package
            # (src/storage/libarchive.h), not at every start.
            self.assertNotIn("libarchive", read_text("/proc/%d/maps" % pid))
        if can_make_cgroups():
            # Each made its cgroup before it knew its replica.
            for pid in first:
                wait_for(lambda: standby_cgroups(pid), 10, "standby %d's cgroup" % pid)
        gate = os.path.join(self.tmp, "gate")
        job_id = self.submit(container_job(
            "standby", "while [ ! -e %s ]; do sleep 0.05; done; echo done" % gate))
        dir_ = self.replica_dir(job_id)
        runner = wait_for(lambda: os.path.exists(os.path.join(dir_, "runner.json")) and
                          json.loads(read_text(os.path.join(dir_, "runner.json"))), 30,
                          "the supervisor's runner.json")
        # One of the two that waited took it, and shows which replica it runs,
        # as a supervisor started for it would (ps, pgrep -f).
        self.assertIn(runner["pid"], first)
        with open("/proc/%d/cmdline" % runner["pid"], "rb") as f:
            args = [a for a in f.read().split(b"\0") if a]
        self.assertEqual(args[1:], [b"--replica-dir", dir_.encode()])
        # The pool is full again, without the one that left it.
        refilled = wait_for(lambda: len(standbys_of(daemon)) == 2 and standbys_of(daemon), 30,
                            "the pool to refill")
        self.assertNotIn(runner["pid"], refilled)
        if can_make_cgroups():
            # The one that took the replica renamed its cgroup to the
            # replica's, where the trainer runs.
            self.assertEqual(standby_cgroups(runner["pid"]), [])
            trainer = json.loads(read_text(os.path.join(dir_, "trainer.json")))
            self.assertTrue(self.cgroups_of(job_id))
            self.assertIn("/stoker/r-", read_text("/proc/%d/cgroup" % trainer["pid"]))
        open(gate, "w").close()
        self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")
        self.assertIn("done", read_text(os.path.join(dir_, "output.log")))

        # They end with the daemon: nothing waits for a daemon that is gone.
        self.daemon.kill(signal.SIGKILL)
        wait_for(lambda: not any(pid_alive(p) for p in refilled), 10, "the standbys to exit")
        # ... and take the cgroups they made ahead with them.
        for pid in refilled:
            self.assertEqual(standby_cgroups(pid), [])

    def test_jobs_with_more_replicas_than_standbys_all_start(self):
        # Four replicas a job, two standbys: the rest start the slow way.
        # Every replica's trainer starts. The job ends with its chief (a
        # worker still running then is stopped, as on Vertex), so the chief
        # waits (30 s at most) until its three workers have started: a worker
        # that never starts fails the check below, one that starts late is
        # not stopped before it ran.
        ids = []
        for i in range(3):
            started = os.path.join(self.tmp, "started%d" % i)
            os.mkdir(started)
            worker = "touch %s/w.$$; echo w" % started
            chief = ("i=0; while [ $(ls %s | wc -l) -lt 3 ] && [ $i -lt 600 ]; do "
                     "sleep 0.05; i=$((i+1)); done; echo chief" % started)
            workers = [{"machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 3,
                        "containerSpec": {"imageUri": IMAGE,
                                          "command": ["/bin/sh", "-c", worker]}}]
            ids.append(self.submit(container_job("wide%d" % i, chief, pools=workers)))
        for i, job_id in enumerate(ids):
            self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED", job_id)
            self.assertEqual(len(os.listdir(os.path.join(self.tmp, "started%d" % i))), 3, job_id)
            for r in ["workerpool0-0", "workerpool1-0", "workerpool1-1", "workerpool1-2"]:
                dir_ = self.replica_dir(job_id, r)
                status = wait_for(lambda: os.path.exists(os.path.join(dir_, "status.json")) and
                                  json.loads(read_text(os.path.join(dir_, "status.json"))), 60,
                                  "%s of job %s to end" % (r, job_id))
                self.assertIn(status["state"], ("exited", "cancelled"), (job_id, r, status))
                self.assertTrue(os.path.exists(os.path.join(dir_, "trainer.json")), (job_id, r))


if __name__ == "__main__":
    import unittest
    unittest.main()
