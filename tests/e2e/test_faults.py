"""Storage faults (issue #7): a full disk, a locked database, damaged replica
files, a deleted replica directory and a damaged database. Each must give a
clear error (HTTP 5xx with a message, CLI non-zero with the message) or a job
state with a reason: never a crash loop, a lost job or a job stuck running."""
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
import urllib.request

from harness import (IMAGE, SOURCE, STOKERD, Daemon, StokerTestCase, container_job, pid_alive,
                     read_text, skip_or_fail, wait_for)

TERMINAL = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")


def no_retries(job):
    """Infrastructure failures (a lost replica) restart the job by default;
    these tests look at the failure itself."""
    job["jobSpec"]["scheduling"] = {"disableRetries": True}
    return job


def gated(gate, pid_file=None):
    """A trainer that records its pid, then waits for `gate` to exist."""
    pid = 'echo $$ > %s; ' % pid_file if pid_file else ""
    return pid + "echo waiting; while [ ! -e %s ]; do sleep 0.05; done; echo done" % gate


class FaultsTest(StokerTestCase):

    def assert_daemon_up(self):
        self.assertIsNone(self.daemon.proc.poll(), "stokerd exited: see %s" % self.daemon.log.name)
        status, _ = self.api("GET", "/healthz")
        self.assertEqual(status, 200)

    def test_locked_database_answers_503_and_catches_up_when_released(self):
        gate = os.path.join(self.tmp, "gate")
        running = self.submit(container_job("running", gated(gate)))
        wait_for(lambda: self.job(running)["state"] == "JOB_STATE_RUNNING", 30, "RUNNING")
        holder = sqlite3.connect(os.path.join(self.data, "stoker.db"), isolation_level=None, timeout=30)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            status, body = self.api("POST", self.project_path, container_job("blocked", "true"))
            self.assertEqual(status, 503, body)
            self.assertIn("locked", body["error"]["message"])
            r = self.stoker("jobs", "submit", "--config",
                            self.write("j.json", json.dumps(container_job("cli", "true"))), check=False)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("locked", r.stderr)
            # The trainer ends while the control loop cannot record it.
            open(gate, "w").close()
            wait_for(lambda: os.path.exists(os.path.join(self.replica_dir(running), "status.json")), 30,
                     "the trainer to end")
            # Reads still answer; the job is not lost.
            self.assertIn(self.job(running)["state"], ("JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"))
            self.assert_daemon_up()
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        self.assertEqual(self.wait_state(running)["state"], "JOB_STATE_SUCCEEDED")
        after = self.submit(container_job("after", "echo fine"))
        self.assertEqual(self.wait_state(after)["state"], "JOB_STATE_SUCCEEDED")
        self.assert_daemon_up()

    def test_stokerd_starts_while_another_process_holds_a_write_lock(self):
        done = self.submit(container_job("before", "echo fine"))
        self.assertEqual(self.wait_state(done)["state"], "JOB_STATE_SUCCEEDED")
        self.daemon.kill(signal.SIGTERM)
        addr = os.path.join(self.data, "stokerd.addr")
        self.assertFalse(os.path.exists(addr), "a clean stop removes stokerd.addr")
        holder = sqlite3.connect(os.path.join(self.data, "stoker.db"), isolation_level=None, timeout=30)
        holder.execute("BEGIN EXCLUSIVE")
        proc = subprocess.Popen([STOKERD, "--data-dir", self.data, "--listen", "127.0.0.1:0"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            # It either refuses with a message that says "locked", or comes up
            # and serves (stokerd.addr written, /healthz 200, the store
            # readable); waiting forever, or a timeout, is neither.
            def outcome():
                if proc.poll() is not None:
                    return "exited"
                if not os.path.exists(addr):
                    return None
                try:
                    url = read_text(addr).strip()
                    with urllib.request.urlopen(url + "/healthz", timeout=2) as r:
                        return "serving" if r.status == 200 else None
                except (OSError, ValueError):
                    return None

            what = wait_for(outcome, 30, "stokerd to serve or to refuse")
            if what == "exited":
                stderr = proc.stderr.read()
                self.assertNotEqual(proc.returncode, 0, stderr)
                self.assertIn("locked", stderr)
                self.assertNotIn("damaged", stderr)
                self.assertFalse(os.path.exists(addr), "a refused start leaves no stokerd.addr")
            else:
                url = read_text(addr).strip()
                req = urllib.request.Request(url + self.project_path + "/" + done, headers={
                    "authorization": "Bearer " + self.daemon.token})
                with urllib.request.urlopen(req, timeout=30) as r:
                    self.assertEqual(json.loads(r.read())["state"], "JOB_STATE_SUCCEEDED")
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
            proc.stderr.close()
            holder.execute("ROLLBACK")
            holder.close()
        # Once the lock is gone it starts, serves and writes.
        self.daemon = Daemon(self.data, self.config).start()
        self.assertEqual(self.job(done)["state"], "JOB_STATE_SUCCEEDED")
        after = self.submit(container_job("after", "echo fine"))
        self.assertEqual(self.wait_state(after)["state"], "JOB_STATE_SUCCEEDED")
        self.assert_daemon_up()

    def test_corrupt_or_missing_status_json_fails_the_job_with_a_reason(self):
        gate = os.path.join(self.tmp, "gate")
        corrupt = self.submit(no_retries(container_job("corrupt", gated(gate))))
        missing = self.submit(no_retries(container_job("missing", gated(gate))))
        shape = self.submit(no_retries(container_job("shape", gated(gate))))
        for j in (corrupt, missing, shape):
            wait_for(lambda: self.job(j)["state"] == "JOB_STATE_RUNNING", 30, "RUNNING")
        self.daemon.kill(signal.SIGKILL)
        open(gate, "w").close()
        for j in (corrupt, missing, shape):
            wait_for(lambda: os.path.exists(os.path.join(self.replica_dir(j), "status.json")), 30,
                     "the trainers to end")
        with open(os.path.join(self.replica_dir(corrupt), "status.json"), "w") as f:
            f.write('{"state": "exi')
        os.unlink(os.path.join(self.replica_dir(missing), "status.json"))
        # Valid JSON of the wrong shape once made the control loop throw (a crash loop).
        with open(os.path.join(self.replica_dir(shape), "status.json"), "w") as f:
            f.write('{"state": 5, "exit_code": 0, "start_time_us": "soon"}')
        self.daemon = Daemon(self.data, self.config).start()
        job = self.wait_state(corrupt)
        self.assertEqual(job["state"], "JOB_STATE_FAILED")
        self.assertIn("status.json", job["error"]["message"])
        self.assertIn("cannot be read", job["error"]["message"])
        job = self.wait_state(shape)
        self.assertEqual(job["state"], "JOB_STATE_FAILED")
        self.assertIn("cannot be read", job["error"]["message"])
        job = self.wait_state(missing)
        self.assertEqual(job["state"], "JOB_STATE_FAILED")
        self.assertIn("without reporting an exit status", job["error"]["message"])
        self.assert_daemon_up()

    def test_deleted_replica_dir_fails_the_job_and_stops_its_processes(self):
        gate = os.path.join(self.tmp, "gate")
        pid_file = os.path.join(self.tmp, "pid")
        job_id = self.submit(no_retries(container_job("doomed", gated(gate, pid_file))))
        wait_for(lambda: self.job(job_id)["state"] == "JOB_STATE_RUNNING", 30, "RUNNING")
        trainer = int(wait_for(lambda: os.path.exists(pid_file) and read_text(pid_file).strip(), 30,
                               "the trainer's pid"))
        supervisor = json.load(open(os.path.join(self.replica_dir(job_id), "runner.json")))["pid"]
        shutil.rmtree(os.path.join(self.data, "jobs", job_id))
        job = self.wait_state(job_id)
        self.assertEqual(job["state"], "JOB_STATE_FAILED")
        self.assertIn("was deleted", job["error"]["message"])
        # Nothing of the replica keeps running without a place to report.
        for pid in (trainer, supervisor):
            wait_for(lambda: not pid_alive(pid), 15, "process %d to stop" % pid)
        self.assert_daemon_up()
        after = self.submit(container_job("after", "echo fine"))
        self.assertEqual(self.wait_state(after)["state"], "JOB_STATE_SUCCEEDED")

    def test_replicas_left_by_a_crash_after_the_end_was_recorded_are_stopped(self):
        # The chief and a worker run; stokerd dies after committing the job's
        # end but before stopping the worker (simulated by writing the end
        # into the stopped daemon's store). The next stokerd stops the worker.
        worker_pid = os.path.join(self.tmp, "worker.pid")
        job = container_job("left-behind", "sleep 60", pools=[{
            "machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 1,
            "containerSpec": {"imageUri": IMAGE, "command": [
                "/bin/sh", "-c", "echo $$ > %s; exec sleep 60" % worker_pid]}}])
        job_id = self.submit(job)
        pid = int(wait_for(lambda: os.path.exists(worker_pid) and read_text(worker_pid).strip(), 30,
                           "the worker's pid"))
        self.daemon.kill(signal.SIGKILL)
        with sqlite3.connect(os.path.join(self.data, "stoker.db")) as c:
            c.execute("UPDATE jobs SET state = 4, end_time = ? WHERE id = ?",
                      (int(time.time() * 1e6), int(job_id)))
        self.assertTrue(pid_alive(pid))
        self.daemon.start()
        wait_for(lambda: not pid_alive(pid), 30, "the left-behind worker to be stopped")
        self.assertEqual(self.job(job_id)["state"], "JOB_STATE_SUCCEEDED")

    def damaged_start(self):
        """Runs stokerd on the (damaged) data dir; it must refuse with advice."""
        r = subprocess.run([STOKERD, "--data-dir", self.data, "--listen", "127.0.0.1:0"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("damaged", r.stderr)
        self.assertIn("docs/recovery.md", r.stderr)
        self.assertIn(".recover", r.stderr)
        return r.stderr

    def test_damaged_database_refuses_to_start_and_the_documented_recovery_works(self):
        ids = [self.submit(container_job("j%d" % i, "echo %d" % i)) for i in range(3)]
        for j in ids:
            self.assertEqual(self.wait_state(j)["state"], "JOB_STATE_SUCCEEDED")
        self.daemon.kill(signal.SIGTERM)
        db = os.path.join(self.data, "stoker.db")
        self.assertFalse(os.path.exists(db + "-wal") and os.path.getsize(db + "-wal") > 0,
                         "a clean stop leaves no WAL to replay")
        # Damage an index's root page: the file still opens, quick_check
        # finds it, and the table rows stay recoverable.
        with sqlite3.connect(db) as c:
            page = c.execute("PRAGMA page_size").fetchone()[0]
            root = c.execute("SELECT rootpage FROM sqlite_master WHERE type='index' AND sql IS NOT NULL"
                             " ORDER BY rootpage DESC LIMIT 1").fetchone()[0]
        with open(db, "r+b") as f:
            f.seek((root - 1) * page)
            f.write(b"\xa5" * page)
        self.damaged_start()
        # The steps of docs/recovery.md, as written there.
        doc = read_text(os.path.join(SOURCE, "docs", "recovery.md"))
        self.assertIn("sqlite3 $STOKER_HOME/stoker.db '.recover' | sqlite3 /tmp/recovered.db", doc)
        self.assertIn("fuser $STOKER_HOME/stoker.db", doc)
        recovered = os.path.join(tempfile.mkdtemp(dir=self.tmp), "recovered.db")
        r = subprocess.run("sqlite3 %s '.recover' | sqlite3 %s" % (db, recovered), shell=True,
                           capture_output=True, text=True)
        if "SQL logic error" in r.stderr:  # the sqlite3 3.40 .recover bug the doc describes
            self.assertIn("sqlite3 $STOKER_HOME/stoker.db '.dump' | sqlite3 /tmp/recovered.db", doc)
            os.unlink(recovered)
            subprocess.run("sqlite3 %s '.dump' | sqlite3 %s" % (db, recovered), shell=True, check=True)
        check = subprocess.run(["sqlite3", recovered, "PRAGMA integrity_check; SELECT count(*) FROM jobs;"],
                               capture_output=True, text=True)
        self.assertEqual(check.returncode, 0, check.stderr)
        self.assertEqual(check.stdout.split()[0], "ok")
        os.replace(recovered, db)
        for suffix in ("-wal", "-shm"):
            if os.path.exists(db + suffix):
                os.unlink(db + suffix)
        self.daemon = Daemon(self.data, self.config).start()
        for j in ids:
            self.assertEqual(self.job(j)["state"], "JOB_STATE_SUCCEEDED")

    def test_a_database_file_that_is_not_sqlite_refuses_to_start(self):
        self.daemon.kill(signal.SIGTERM)
        db = os.path.join(self.data, "stoker.db")
        with open(db, "r+b") as f:
            f.write(b"this is not a database at all!!!" * 4)
        self.damaged_start()


class FullDiskTest(StokerTestCase):
    """The data dir on a 24 MiB file system of its own, which the test fills.

    Needs root (or a loop device) to mount it; without, the test skips,
    unless STOKER_TEST_REQUIRE_ALL=1 (CI sets it), which makes that a
    failure: a CI run must not pass without having run it."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stoker-e2e-")
        self.data = os.path.join(self.tmp, "data")
        os.makedirs(self.data)
        self.mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", self.data],
                                      capture_output=True).returncode == 0
        if not self.mounted:
            image = os.path.join(self.tmp, "disk.img")
            ok = subprocess.run("truncate -s 24M %s && mkfs.ext4 -q %s && mount -o loop %s %s" % (
                image, image, image, self.data), shell=True, capture_output=True).returncode == 0
            if not ok:
                shutil.rmtree(self.tmp, ignore_errors=True)
                skip_or_fail(self, "cannot mount a small file system (tmpfs or loop ext4) here: "
                             "not root?")
            self.mounted = True
        # Runs after tearDown: unmount, then remove what is left of the temp dir.
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.addCleanup(subprocess.run, ["umount", "-l", self.data], check=False)
        self.daemon = Daemon(self.data, self.config).start()
        self.project_path = "/v1/projects/p/locations/l/customJobs"

    def fill(self):
        filler = os.path.join(self.data, "filler")
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            for chunk in (1 << 20, 4096, 1):
                try:
                    while True:
                        os.write(fd, b"\0" * chunk)
                except OSError:
                    pass
        finally:
            os.close(fd)
        return filler

    def test_full_disk_gives_clear_errors_and_loses_no_job(self):
        gate = os.path.join(self.tmp, "gate")
        running = self.submit(container_job("running", gated(gate)))
        wait_for(lambda: self.job(running)["state"] == "JOB_STATE_RUNNING", 30, "RUNNING")
        filler = self.fill()

        status, body = self.api("POST", self.project_path, container_job("nospace", "true"))
        self.assertEqual(status, 503, body)
        self.assertIn("free space", body["error"]["message"])
        r = self.stoker("jobs", "submit", "--config",
                        self.write("j.json", json.dumps(container_job("cli", "true"))), check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("space", r.stderr)
        # The trainer ends while nothing can be written.
        open(gate, "w").close()
        self.assertEqual(self.job(running)["name"].rsplit("/", 1)[1], running)
        wait_for(lambda: subprocess.run(["pgrep", "-f", "stoker-run.*" + running], capture_output=True)
                 .returncode != 0, 30, "the supervisor to end")
        self.assertIsNone(self.daemon.proc.poll(), "stokerd died on a full disk")

        os.unlink(filler)
        job = self.wait_state(running)
        # Its status could not be written: it ends with a reason, never stuck.
        self.assertIn(job["state"], TERMINAL)
        if job["state"] != "JOB_STATE_SUCCEEDED":
            self.assertTrue(job["error"]["message"], job)
        after = self.submit(container_job("after", "echo fine"))
        self.assertEqual(self.wait_state(after)["state"], "JOB_STATE_SUCCEEDED")
        # A restart finds everything.
        self.daemon.kill(signal.SIGKILL)
        self.daemon = Daemon(self.data, self.config).start()
        for j in (running, after):
            self.assertIn(self.job(j)["state"], TERMINAL)
