"""`stoker admin backup FILE` (issue #19): a consistent copy of the store
taken while the daemon runs and jobs run, that opens with every job; admins
only."""
import json
import os
import signal
import sqlite3
import stat
import subprocess
import urllib.error
import urllib.request

from harness import STOKER, Daemon, StokerTestCase, container_job, wait_for


class BackupTest(StokerTestCase):

    def submit_jobs(self):
        """Three ended jobs and one running (held at a gate); returns all ids."""
        self.gate = os.path.join(self.tmp, "gate")
        done = [self.submit(container_job("done-%d" % i, "echo ok")) for i in range(3)]
        for job_id in done:
            self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")
        running = self.submit(container_job(
            "running", "while [ ! -e %s ]; do sleep 0.05; done" % self.gate))
        wait_for(lambda: self.job(running)["state"] == "JOB_STATE_RUNNING", 30, "RUNNING")
        return done + [running]

    def test_backup_while_running_holds_every_job_and_opens(self):
        ids = self.submit_jobs()
        path = os.path.join(self.tmp, "backup", "stoker.db")
        os.makedirs(os.path.dirname(path))
        r = self.stoker("admin", "backup", path)
        self.assertIn("Wrote a copy of the store", r.stderr)
        # Private to the user who took it: it holds token hashes and specs.
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        # The daemon kept serving; the running job is untouched.
        self.assertEqual(self.job(ids[-1])["state"], "JOB_STATE_RUNNING")

        db = sqlite3.connect(path)
        try:
            self.assertEqual(db.execute("PRAGMA integrity_check").fetchone()[0], "ok")
            self.assertEqual(db.execute("PRAGMA user_version").fetchone()[0], 5)  # the store schema (store_schema.cc)
            rows = dict(db.execute("SELECT id, display_name FROM jobs").fetchall())
            users = [u for (u,) in db.execute("SELECT name FROM users")]
        finally:
            db.close()
        self.assertEqual(sorted(rows), sorted(int(i) for i in ids))
        self.assertEqual(rows[int(ids[-1])], "running")
        self.assertTrue(users)

        # Restored into a new data dir, a daemon serves every job of it.
        open(self.gate, "w").close()
        self.assertEqual(self.wait_state(ids[-1])["state"], "JOB_STATE_SUCCEEDED")
        restored = os.path.join(self.tmp, "restored")
        os.makedirs(restored)
        os.rename(path, os.path.join(restored, "stoker.db"))
        other = Daemon(restored, self.config).start()
        try:
            req = urllib.request.Request(
                other.url + self.project_path + "?pageSize=100",
                headers={"authorization": "Bearer " + other.token})
            with urllib.request.urlopen(req, timeout=30) as resp:
                jobs = json.loads(resp.read())["customJobs"]
            names = {j["name"].rsplit("/", 1)[1]: j["displayName"] for j in jobs}
            self.assertEqual(sorted(names), sorted(ids))
            self.assertEqual(names[ids[0]], "done-0")
        finally:
            other.kill(signal.SIGTERM)

    def test_backup_to_stdout(self):
        self.submit(container_job("one", "echo ok"))
        env = dict(os.environ, STOKER_HOME=os.path.join(self.tmp, "no-home"),
                   STOKER_TOKEN=self.daemon.token)
        env.pop("STOKER_SERVER", None)
        r = subprocess.run([STOKER, "--server", self.daemon.url, "admin", "backup", "-"],
                           capture_output=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith(b"SQLite format 3\0"))

    def test_only_admins_may_back_up(self):
        for name, role in (("bob", "user"), ("vera", "viewer")):
            self.stoker("admin", "users", "add", name, "--role", role)
            token = self.stoker("admin", "users", "token", name).stdout.strip()
            req = urllib.request.Request(self.daemon.url + "/v1/admin/backup", data=b"",
                                         method="POST",
                                         headers={"authorization": "Bearer " + token})
            with self.assertRaises(urllib.error.HTTPError) as caught:
                urllib.request.urlopen(req, timeout=30)
            self.assertEqual(caught.exception.code, 403)
            path = os.path.join(self.tmp, name + ".db")
            r = self.stoker("admin", "backup", path, check=False, env={"STOKER_TOKEN": token})
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("admin", r.stderr)
            self.assertFalse(os.path.exists(path))
        # No token at all: 401.
        req = urllib.request.Request(self.daemon.url + "/v1/admin/backup", data=b"", method="POST")
        with self.assertRaises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(req, timeout=30)
        self.assertEqual(caught.exception.code, 401)
