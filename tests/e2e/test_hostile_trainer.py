"""Issue #14: what a hostile trainer or user could do to a root daemon, tried
against the real daemon (docs/security.md, "Trust boundary").

A root stokerd runs trainers as nobody. The trainer below tries every
reproduction of the issue that goes through the replica directory: forge
trainer.json and runner.lock so that the daemon SIGKILLs a root process
group (1), point the cancel at another process (2), replace output.log and
log_state.json with links to the admin token (3), plant a FIFO at
status.json (4), fake its own completion (6), and link pushed.metrics and
its own metrics file at the token. Each step prints a MARK- line only when
the file system let it through; the test then checks what the daemon did:
the root victim lives, cancel and a lost supervisor end the job as they
should, other users' jobs still run, and no log shows the token. The same
trainer runs with job_isolation off (the account boundary alone) and
required.

HostileInputTest covers the rest: nfsMounts confinement (5), $(VAR)
expansion bombs (7), the store's file modes (8), the staging bucket (9) and
the small items (10).
"""
import hashlib
import io
import json
import os
import signal
import stat
import subprocess
import tarfile
import time
import unittest

from harness import (DEFAULT_CONFIG, Daemon, StokerTestCase, container_job, pid_alive,
                     read_text, wait_for)

JOBS = "/v1/projects/p/locations/l/customJobs"
NOBODY = 65534
NOBODY_CONFIG = DEFAULT_CONFIG.replace("default_unix_user: root\nallow_root_trainers: true\n", "")

# Runs as nobody in DIR/work. $D is its replica directory; every MARK- line
# is an attack step that the file system allowed.
HOSTILE = r"""
D=$STOKER_REPLICA
# The supervisor writes its files right after the fork: attack them once there.
while [ ! -e $D/runner.json ]; do sleep 0.01; done
rm $D/trainer.json && echo MARK-REMOVED-TRAINER-JSON
echo "{\"pgid\": $VICTIM, \"pid\": $VICTIM, \"start_time_us\": 1}" > $D/trainer.json && echo MARK-FORGED-TRAINER-JSON
mv $D/runner.lock $D/runner.lock.old && echo MARK-MOVED-LOCK
touch $D/runner.lock.new && echo MARK-CREATED-IN-REPLICA-DIR
echo "{\"pid\": $VICTIM}" > $D/runner.json && echo MARK-FORGED-RUNNER-JSON
ln -sf $DATA/token $D/output.log && echo MARK-LINKED-LOG
ln -sf $DATA/token $D/output.log.1 && echo MARK-LINKED-LOG-1
echo '{"files": [{"name": "output.log.1", "ino": 1, "start": 0}]}' > $D/log_state.json && echo MARK-LOG-STATE
mkfifo $D/status.json.fifo && echo MARK-FIFO
echo '{"state": "exited", "exit_code": 0, "message": "forged"}' > $D/status.json && echo MARK-FAKED-STATUS
ln -sf $DATA/token $D/pushed.metrics && echo MARK-LINKED-PUSHED
ln -sf $DATA/token $D/hypertune/output.metrics && echo HYPERTUNE-IS-MINE
echo "HOME=$HOME"
pwd
echo ready > ready
exec sleep 600
"""


class HostileTrainerCase(StokerTestCase):
    config = NOBODY_CONFIG + "job_isolation: off\n"

    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs a root daemon, whose trainers run as nobody")
        super().setUp()
        os.chmod(self.tmp, 0o711)  # nobody walks down to its work dir
        os.chmod(self.data, 0o711)
        # A root process group that has nothing to do with Stoker.
        self.victim = subprocess.Popen(["setsid", "sleep", "600"])
        self.addCleanup(self.victim.kill)
        self.stoker("admin", "users", "add", "alice", "--role", "user")
        self.alice = self.stoker("admin", "users", "token", "alice").stdout.strip()
        self.stoker("admin", "users", "add", "bob", "--role", "user")
        self.bob = self.stoker("admin", "users", "token", "bob").stdout.strip()

    def hostile_job(self):
        """Starts the hostile trainer as alice; returns its id once it is
        done attacking (and sleeping)."""
        job = self.submit_as(self.alice, container_job(
            "hostile", HOSTILE, env=[("VICTIM", str(self.victim.pid)), ("DATA", self.data)]))
        wait_for(lambda: os.path.exists(os.path.join(self.replica_dir(job), "work", "ready")), 30,
                 "the hostile trainer to finish its attacks")
        wait_for(lambda: self.job(job)["state"] == "JOB_STATE_RUNNING", 30, "the job to run")
        return job

    def alice_logs(self, job):
        return self.stoker("jobs", "logs", job, env={"STOKER_TOKEN": self.alice}).stdout

    def check_contained(self, job):
        """No attack step got through, the daemon never believed one, and
        nothing of the token reached alice."""
        token = self.daemon.token
        log = self.alice_logs(job)
        self.assertNotIn("MARK-", log)
        self.assertNotIn(token, log)
        work = os.path.join(self.replica_dir(job), "work")
        self.assertIn("HOME=" + work, log)  # nobody's home does not exist; never /root
        self.assertTrue(pid_alive(self.victim.pid), "the daemon killed a root process group")
        final = self.job(job)
        self.assertNotIn(token, json.dumps(final))
        events = self.api("GET", JOBS + "/" + job + "/events")[1]
        self.assertNotIn(token, json.dumps(events))
        return log

    def test_cancel_reaches_the_real_supervisor(self):
        job = self.hostile_job()
        # (6) It wrote no status of its own: the job runs on.
        for _ in range(10):
            self.assertEqual(self.job(job)["state"], "JOB_STATE_RUNNING")
            time.sleep(0.1)
        # (4) Scheduling goes on for everyone else.
        other = self.submit_as(self.bob, container_job("other", "echo OTHER-RAN"))
        self.assertEqual(self.wait_state(other, timeout=30)["state"], "JOB_STATE_SUCCEEDED")
        # (2) Cancel stops the trainer, not the process it named.
        self.stoker("jobs", "cancel", job, env={"STOKER_TOKEN": self.alice})
        self.assertEqual(self.wait_state(job, timeout=30)["state"], "JOB_STATE_CANCELLED")
        self.check_contained(job)

    def test_a_lost_supervisor_kills_only_the_trainer(self):
        job = self.hostile_job()
        d = self.replica_dir(job)
        trainer = json.loads(read_text(os.path.join(d, "trainer.json")))["pid"]
        supervisor = json.loads(read_text(os.path.join(d, "runner.json")))["pid"]
        self.check_contained(job)
        os.kill(supervisor, signal.SIGKILL)
        # The daemon finds the replica lost (and restarts the job): it kills
        # what the real supervisor recorded, never the group the trainer named.
        wait_for(lambda: "died without reporting" in json.dumps(
            self.api("GET", JOBS + "/" + job + "/events")[1]), 30, "the replica to be found lost")
        wait_for(lambda: not pid_alive(trainer), 10, "the trainer to die with its supervisor")
        self.assertTrue(pid_alive(self.victim.pid), "the daemon killed a root process group")
        self.stoker("jobs", "cancel", job)
        self.wait_state(job, timeout=30)

    def test_links_left_in_an_older_replica_dir_are_not_followed(self):
        # Defence in depth: a replica directory of an older layout, where the
        # trainer owned everything, may hold links. The daemon's readers
        # refuse them (here planted by root, after the job ended).
        job = self.hostile_job()
        self.stoker("jobs", "cancel", job)
        self.wait_state(job, timeout=30)
        d = self.replica_dir(job)
        token = os.path.join(self.data, "token")
        for name in ("output.log", "output.log.1"):
            if os.path.lexists(os.path.join(d, name)):
                os.unlink(os.path.join(d, name))
            os.symlink(token, os.path.join(d, name))
        with open(os.path.join(d, "log_state.json"), "w") as f:
            json.dump({"files": [{"name": "output.log", "ino": os.stat(token).st_ino, "start": 0}]}, f)
        r = self.stoker("jobs", "logs", job, check=False, env={"STOKER_TOKEN": self.alice})
        self.assertNotIn(self.daemon.token, r.stdout + r.stderr)


class HostileTrainerIsolatedTest(HostileTrainerCase):
    """The same attacks with the trainer's own view of the file system."""
    config = NOBODY_CONFIG + "job_isolation: required\n"


class BucketWritersTest(StokerTestCase):
    """Trainers write buckets as on GCS (any path, overwriting objects), as
    accounts of the bucket group; accounts outside it do not."""
    config = NOBODY_CONFIG

    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs a root daemon, whose trainers run as nobody")
        super().setUp()
        os.chmod(self.tmp, 0o711)
        os.chmod(self.data, 0o711)

    def test_a_trainer_writes_anywhere_in_a_bucket_and_an_outsider_cannot(self):
        self.stoker("storage", "cp", self.write("in.txt", "old\n"), "gs://shared/in/in.txt")
        script = ("mkdir -p $OUT/deep && echo written > $OUT/deep/file && echo OK-WROTE; "
                  "echo new > $IN && echo OK-OVERWROTE; id -G")
        job = self.submit(container_job("writer", script, env=[
            ("OUT", "gs://shared/checkpoints/run1"), ("IN", "gs://shared/in/in.txt")]))
        final = self.wait_state(job)
        log = self.stoker("jobs", "logs", job).stdout
        self.assertEqual(final["state"], "JOB_STATE_SUCCEEDED", log)
        self.assertIn("OK-WROTE", log)
        self.assertIn("OK-OVERWROTE", log)
        got = os.path.join(self.tmp, "got")
        self.stoker("storage", "cp", "gs://shared/checkpoints/run1/deep/file", got)
        self.assertEqual(read_text(got), "written\n")
        self.stoker("storage", "cp", "gs://shared/in/in.txt", got)
        self.assertEqual(read_text(got), "new\n")
        bucket = os.path.join(self.data, "buckets", "shared")
        st = os.stat(bucket)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o2775)
        import grp
        self.assertEqual(grp.getgrgid(st.st_gid).gr_name, "stoker")
        self.assertIn(str(st.st_gid), log.split())  # the trainer had the group
        # The job's own output directory went to the trainer but stayed the
        # group's, so other trainers of the bucket still write there.
        out = os.stat(os.path.join(self.data, "buckets", "stoker-outputs", job))
        self.assertEqual((out.st_uid, out.st_gid), (NOBODY, st.st_gid))
        # An account outside the group cannot write (uid 1, 'daemon').
        r = subprocess.run(["setpriv", "--reuid=1", "--regid=1", "--clear-groups", "sh", "-c",
                            "echo x > %s/evil || mkdir %s/evil" % (bucket, bucket)],
                           capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertFalse(os.path.exists(os.path.join(bucket, "evil")))


def targz(files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def python_job(name, module, package_uri):
    return {"displayName": name, "jobSpec": {"workerPoolSpecs": [{
        "machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 1,
        "pythonPackageSpec": {"executorImageUri": "local/sh", "packageUris": [package_uri],
                              "pythonModule": module}}]}}


class StagedAtLaunchTest(StokerTestCase):
    """A staged package changed after its job was accepted is refused when
    the job starts, not run."""
    config = DEFAULT_CONFIG + "inventory: {cpus: 4, memory_gb: 8, gpus: [{type: NVIDIA_TESLA_T4}]}\n"

    def test_a_package_changed_while_its_job_waits_is_not_run(self):
        pkg = targz({"pkg/setup.py": "from setuptools import setup\nsetup(name='pkg')\n",
                     "pkg/trainer/__init__.py": "", "pkg/trainer/task.py": "print('GOOD')\n"})
        status, body = self.api("POST", "/v1/stoker/staging", raw=pkg)
        self.assertEqual(status, 200, body)
        uri = body["uri"]
        t4 = ("NVIDIA_TESLA_T4", 1)
        blocker = self.submit(container_job("blocker", "sleep 60", accelerator=t4))
        wait_for(lambda: self.job(blocker)["state"] == "JOB_STATE_RUNNING", 30, "the GPU holder")
        job = python_job("staged", "trainer.task", uri)
        job["jobSpec"]["workerPoolSpecs"][0]["machineSpec"].update(
            acceleratorType=t4[0], acceleratorCount=t4[1])
        waiting = self.submit(job)  # accepted: the package is intact now
        self.assertEqual(self.job(waiting)["state"], "JOB_STATE_QUEUED")
        with open(os.path.join(self.data, "staging", uri.rsplit("/", 1)[1]), "wb") as f:
            f.write(targz({"pkg/trainer/task.py": "print('EVIL')\n"}))
        self.stoker("jobs", "cancel", blocker)
        final = self.wait_state(waiting)
        self.assertEqual(final["state"], "JOB_STATE_FAILED")
        self.assertIn("does not hold the bytes its name promises", final["error"]["message"])
        self.assertNotIn("EVIL", self.stoker("jobs", "logs", waiting, check=False).stdout)


class HostileInputTest(StokerTestCase):

    def post_job(self, job):
        return self.api("POST", JOBS, job)

    def test_nfs_mount_points_stay_one_name_below_the_root(self):
        for point in ("../../escaped", "/etc/stoker-x", "a/b", "..", ""):
            job = container_job("nfs", "true")
            job["jobSpec"]["workerPoolSpecs"][0]["nfsMounts"] = [
                {"server": "10.0.0.1", "path": self.tmp, "mountPoint": point}]
            status, body = self.post_job(job)
            self.assertEqual(status, 400, (point, body))
            self.assertIn("nfsMounts[0].mountPoint", body["error"]["message"])
        self.assertFalse(os.path.lexists("/etc/stoker-x"))

    def rss_kb(self):
        status = read_text("/proc/%d/status" % self.daemon.proc.pid)
        return int([l for l in status.splitlines() if l.startswith("VmRSS:")][0].split()[1])

    def test_env_expansion_is_bounded_after_expansion(self):
        rss_before = self.rss_kb()
        env = [{"name": "V0", "value": "x" * 100}]
        for i in range(1, 10):
            env.append({"name": "V%d" % i, "value": "$(V%d)" % (i - 1) * 10})
        job = container_job("bomb", "true")
        job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["env"] = env
        status, body = self.post_job(job)
        self.assertEqual(status, 400, body)
        msg = body["error"]["message"]
        self.assertIn("containerSpec.env[4]", msg)  # 10^4 * 100 bytes: the first too long
        self.assertIn("after $(VAR) expansion", msg)
        # Arguments expand against the whole environment.
        job = container_job("bomb-args", "true")
        pool = job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]
        pool["env"] = env[:3]
        pool["args"] = ["$(V2)" * 20]
        status, body = self.post_job(job)
        self.assertEqual(status, 400, body)
        self.assertIn("containerSpec.args[0]", body["error"]["message"])
        # The reproduction took the daemon from 17 MB to 497 MB.
        self.assertLess(self.rss_kb() - rss_before, 64 * 1024)

    def test_the_store_is_private_to_the_daemon(self):
        db = os.path.join(self.data, "stoker.db")
        self.submit(container_job("one", "true"))  # the WAL has content
        for suffix in ("", "-wal", "-shm"):
            path = db + suffix
            self.assertTrue(os.path.exists(path), path)
            self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600, path)
        # A store left readable by others is closed at the next start.
        self.daemon.kill(signal.SIGTERM)
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(db + suffix):
                os.chmod(db + suffix, 0o644)
        self.daemon = Daemon(self.data, self.config).start()
        self.assertEqual(stat.S_IMODE(os.stat(db).st_mode), 0o600)
        self.assertIn("made it 0600", read_text(os.path.join(self.data, "stokerd.test.log")))

    def test_staging_is_written_only_by_staging_and_checked_on_use(self):
        self.stoker("admin", "users", "add", "mallory", "--role", "user")
        mallory = self.stoker("admin", "users", "token", "mallory").stdout.strip()
        good = targz({"pkg/setup.py": "from setuptools import setup\nsetup(name='pkg')\n",
                      "pkg/trainer/__init__.py": "", "pkg/trainer/task.py": "print('GOOD')\n"})
        status, body = self.api("POST", "/v1/stoker/staging", raw=good)
        self.assertEqual(status, 200, body)
        uri = body["uri"]
        name = uri.rsplit("/", 1)[1]
        self.assertEqual(name, hashlib.sha256(good).hexdigest() + ".tar.gz")
        # Another user cannot replace it through the bucket API...
        evil = targz({"pkg/trainer/task.py": "print('EVIL')\n"})
        status, body = self.api("POST", "/upload/storage/v1/b/stoker-staging/o?name=" + name,
                                raw=evil, token=mallory)
        self.assertEqual(status, 403, body)
        self.assertIn("written only by staging", body["error"]["message"])
        r = self.stoker("storage", "cp", self.write("evil.tar.gz", "x"), "gs://stoker-staging/x",
                        check=False)
        self.assertNotEqual(r.returncode, 0)
        # ... and a package changed behind the daemon's back is refused.
        with open(os.path.join(self.data, "staging", name), "wb") as f:
            f.write(evil)
        status, body = self.post_job(python_job("staged", "trainer.task", uri))
        self.assertEqual(status, 400, body)
        self.assertIn("does not hold the bytes its name promises", body["error"]["message"])

    def test_small_items_are_refused_naming_the_field(self):
        job = container_job("fake\nJOB_STATE_SUCCEEDED  row", "true")
        status, body = self.post_job(job)
        self.assertEqual(status, 400, body)
        self.assertIn("displayName", body["error"]["message"])
        status, body = self.post_job(python_job("mod", "../../x", "gs://b/p.tar.gz"))
        self.assertEqual(status, 400, body)
        self.assertIn("pythonModule", body["error"]["message"])
        status, body = self.api("POST", "/upload/storage/v1/b/long/o?name=" + "a" * 300, raw=b"x")
        self.assertEqual(status, 400, body)
        self.assertIn("255", body["error"]["message"])
        # A YAML alias bomb: the CLI refuses it instead of expanding it.
        lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
        for i in range(1, 10):
            lines.append("a%d: &a%d [%s]" % (i, i, ", ".join(["*a%d" % (i - 1)] * 9)))
        bomb = self.write("bomb.yaml", "\n".join(lines) + "\n")
        r = self.stoker("jobs", "submit", "--config", bomb, check=False, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("expands to more than", r.stderr)


if __name__ == "__main__":
    unittest.main()
