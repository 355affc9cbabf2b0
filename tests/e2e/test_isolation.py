"""Job isolation end to end (config job_isolation; src/runner/isolation.h).

Two Stoker users whose replicas run as the same Unix account (the default
account of a root daemon, or a daemon that is not root): the second job's
trainer tries to read the first job's log and replica directory, the daemon's
token and database, to list the data dir, and to reach into the first
trainer's view through /proc/PID/root. Every attempt must fail, while the
trainer still writes its model, reads a bucket object through gs:// and
reports a hypertune metric. The same attack with job_isolation: off shows
the test can tell the difference.
"""
import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import unittest

from harness import (DEFAULT_CONFIG, SOURCE, STOKERD, Daemon, StokerTestCase, container_job,
                     others_may_read, read_text, skip_or_fail, stokerd_refuses, wait_for)

JOBS = "/v1/projects/p/locations/l/customJobs"
# Replicas run as nobody (the default account), never as root.
ISOLATED_CONFIG = DEFAULT_CONFIG.replace(
    "default_unix_user: root\nallow_root_trainers: true\n", "") + "job_isolation: required\n"
NOBODY = 65534

# What job B's trainer tries; every line that must not appear ends in a
# marker the test looks for.
ATTACK = r"""
A_DIR={a_dir}
DATA={data}
cat $A_DIR/output.log && echo MARK-READ-A-LOG
cat $A_DIR/work/mine.txt && echo MARK-READ-A-FILE
ls $A_DIR && echo MARK-LISTED-A
cat $DATA/token && echo MARK-READ-TOKEN
head -c 16 $DATA/stoker.db && echo MARK-READ-DB
ls $DATA && echo MARK-LISTED-DATA
ls $DATA/jobs && echo MARK-LISTED-JOBS
for p in /proc/[0-9]*; do cat $p/root$A_DIR/work/mine.txt 2>/dev/null && echo MARK-VIA-PROC-$p; done
mkdir -p "$AIP_MODEL_DIR" && echo model > "$AIP_MODEL_DIR/model.txt" && echo OK-WROTE-MODEL
cat gs://shared/input.txt && echo OK-READ-BUCKET
python3 -c "import hypertune; hypertune.HyperTune().report_hyperparameter_tuning_metric(hyperparameter_metric_tag='accuracy', metric_value=0.75, global_step=1)" && echo OK-REPORTED
pwd
"""


class IsolationCase(StokerTestCase):
    """Users alice and bob, neither mapped to a Unix account of its own."""

    config = ISOLATED_CONFIG

    def setUp(self):
        # The trainers (nobody) import Stoker's Python helpers from the checkout.
        helpers = os.path.join(SOURCE, "src", "python")
        if not others_may_read(helpers):
            skip_or_fail(self, "trainers running as nobody cannot reach %s: clone Stoker where "
                         "others may enter (chmod o+x on each directory of the path)" % helpers)
        super().setUp()
        # The trainer account must be able to walk down to its replica dir.
        os.chmod(self.tmp, 0o711)
        os.chmod(self.data, 0o711)

    def isolation_in_use(self):
        log = read_text(os.path.join(self.data, "stokerd.test.log"))
        if "cannot isolate trainers on this machine" in log:
            skip_or_fail(self, "this machine cannot isolate trainers: " +
                         log[log.find("job_isolation"):][:300])

    def attack(self):
        """Runs job A (alice) and, while it runs, job B (bob); returns B's
        final job, its log and its replica dir."""
        src = os.path.join(self.tmp, "input.txt")
        with open(src, "w") as f:
            f.write("bucket-content\n")
        self.stoker("storage", "cp", src, "gs://shared/input.txt")
        alice, bob = self.add_user("alice"), self.add_user("bob")
        a = self.submit_as(alice, container_job(
            "a", "echo A-LOG-SECRET; echo A-FILE-SECRET > mine.txt; sleep 120"))
        a_dir = self.replica_dir(a)
        wait_for(lambda: os.path.exists(os.path.join(a_dir, "work", "mine.txt")), 30,
                 "job A's file")
        # The supervisor copies A's stdout to output.log on its own time (slower
        # under ASan): wait for the secret there too, so B's read finds it.
        wait_for(lambda: "A-LOG-SECRET" in read_text(os.path.join(a_dir, "output.log")), 30,
                 "job A's log line")
        b = self.submit_as(bob, container_job("b", ATTACK.format(a_dir=a_dir, data=self.data)))
        final = self.wait_state(b)
        log = self.stoker("jobs", "logs", b).stdout
        self.stoker("jobs", "cancel", a)
        return final, log, self.replica_dir(b)


class JobIsolationTest(IsolationCase):

    @unittest.skipUnless(os.geteuid() == 0, "a root daemon maps both users to nobody")
    def test_a_trainer_cannot_read_another_jobs_files_or_daemon_secrets(self):
        self.isolation_in_use()
        final, log, b_dir = self.attack()
        self.assertEqual(final["state"], "JOB_STATE_SUCCEEDED", log)
        for marker in ("MARK-", "A-LOG-SECRET", "A-FILE-SECRET", self.daemon.token, "SQLite"):
            self.assertNotIn(marker, log)
        # ... while what the trainer needs works.
        for marker in ("OK-WROTE-MODEL", "OK-READ-BUCKET", "bucket-content", "OK-REPORTED", b_dir):
            self.assertIn(marker, log)
        metrics = json.loads(read_text(os.path.join(b_dir, "hypertune", "output.metrics")))
        self.assertEqual(float(metrics["accuracy"]), 0.75)
        models = [os.path.join(r, f) for r, _, fs in os.walk(os.path.join(self.data, "buckets"))
                  for f in fs if f == "model.txt"]
        self.assertEqual(len(models), 1, models)
        self.assertEqual(read_text(models[0]), "model\n")
        self.assertEqual(os.stat(models[0]).st_uid, NOBODY)
        # The files are there: they were hidden, not missing.
        self.assertTrue(os.path.exists(os.path.join(self.data, "token")))


GCS_TRAINER = r"""
import os, sys
with open("/gcs/shared/input.txt") as f:
    text = f.read()
os.makedirs("/gcs/shared/out", exist_ok=True)
with open("/gcs/shared/out/%s.txt" % sys.argv[1], "w") as f:
    f.write("seen: " + text)
print("GCS-LISTING", sorted(os.listdir("/gcs")))
"""


class GcsPathsTest(IsolationCase):
    """/gcs/BUCKET in an isolated trainer's view, cold and warm (gcs_mounts.h)."""

    config = ISOLATED_CONFIG + "warm_start_idle_seconds: 60\n"

    @unittest.skipUnless(os.geteuid() == 0, "a root daemon makes /gcs")
    def test_an_isolated_trainer_reads_and_writes_buckets_at_gcs(self):
        self.isolation_in_use()
        src = self.write("input.txt", "bucket-content\n")
        self.stoker("storage", "cp", src, "gs://shared/input.txt")
        self.stoker("storage", "mb", "gs://other")
        script = self.write("gcs_trainer.py", GCS_TRAINER)
        os.chmod(script, 0o644)
        for name, labels in (("cold", {"stoker-warm-start": "false"}),
                             ("warm", {"stoker-warm-start": "true"})):
            job = container_job("gcs-" + name, "")
            job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["command"] = [
                "python3", script, name]
            job["labels"] = labels
            job_id = self.submit(job)
            final = self.wait_state(job_id, timeout=120)
            log = read_text(os.path.join(self.replica_dir(job_id), "output.log"))
            self.assertEqual(final["state"], "JOB_STATE_SUCCEEDED", log)
            # Every bucket, stoker-outputs (the jobs' default outputs) too.
            self.assertIn("GCS-LISTING ['other', 'shared', 'stoker-outputs']", log)
            out = os.path.join(self.data, "buckets", "shared", "out", name + ".txt")
            self.assertEqual(read_text(out), "seen: bucket-content\n")
            self.assertEqual(os.stat(out).st_uid, NOBODY)
            events = json.dumps(self.api("GET", JOBS + "/" + job_id + "/events")[1])
            self.assertEqual("warm start:" in events, name == "warm", events)
        # The host's /gcs stays empty: the buckets appear only in the views.
        self.assertEqual(os.listdir("/gcs"), [])


class WithoutIsolationTest(IsolationCase):
    """The same attack with job_isolation: off succeeds: the test above can fail."""

    config = ISOLATED_CONFIG.replace("job_isolation: required", "job_isolation: off")

    @unittest.skipUnless(os.geteuid() == 0, "a root daemon maps both users to nobody")
    def test_the_same_trainer_reads_the_other_jobs_files(self):
        final, log, _ = self.attack()
        self.assertEqual(final["state"], "JOB_STATE_SUCCEEDED", log)
        self.assertIn("A-LOG-SECRET", log)
        self.assertIn("A-FILE-SECRET", log)
        self.assertIn("MARK-READ-A-LOG", log)


class ModesTest(IsolationCase):
    """What auto and required do where a trainer cannot be isolated (one that
    runs as root could undo it), and a bad value."""

    config = DEFAULT_CONFIG + "job_isolation: required\n"  # root trainers allowed

    @unittest.skipUnless(os.geteuid() == 0, "root trainers need a root daemon")
    def test_required_fails_a_replica_it_cannot_isolate_naming_the_key(self):
        job = self.submit(container_job("root", "echo RAN"))
        final = self.wait_state(job)
        self.assertEqual(final["state"], "JOB_STATE_FAILED")
        self.assertIn("job_isolation is required", final["error"]["message"])
        self.assertNotIn("RAN", self.stoker("jobs", "logs", job).stdout)

    @unittest.skipUnless(os.geteuid() == 0, "root trainers need a root daemon")
    def test_auto_runs_it_and_says_so_in_runner_log(self):
        self.daemon.kill(signal.SIGTERM)
        self.daemon = Daemon(self.data, DEFAULT_CONFIG + "job_isolation: auto\n").start()
        job = self.submit(container_job("root", "echo RAN"))
        self.assertEqual(self.wait_state(job)["state"], "JOB_STATE_SUCCEEDED")
        self.assertIn("RAN", self.stoker("jobs", "logs", job).stdout)
        note = read_text(os.path.join(self.replica_dir(job), "runner.log"))
        self.assertIn("job_isolation is auto", note)
        self.assertIn("runs as root", note)
        self.assertEqual(note.count("job_isolation"), 1, note)

    def test_a_bad_value_stops_the_daemon_naming_the_key(self):
        stderr = stokerd_refuses(os.path.join(self.tmp, "bad"), "job_isolation: strict\n")
        self.assertIn("job_isolation: must be auto, required or off", stderr)


class NobodyDaemon(Daemon):
    """stokerd as nobody (a daemon that is not root): every trainer runs as
    nobody too, the account that owns the token and the database."""

    def start(self):
        addr = os.path.join(self.data_dir, "stokerd.addr")
        self.log = open(os.path.join(self.data_dir, "stokerd.test.log"), "ab")
        self.proc = subprocess.Popen(
            ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups", STOKERD,
             "--data-dir", self.data_dir, "--listen", "127.0.0.1:0"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.url = wait_for(lambda: self._healthy_url(addr), 20, "stokerd to answer /healthz")
        return self


def start_as_nobody(case):
    """A StokerTestCase setUp whose daemon runs as `nobody` (with
    case.config) on a fresh case.tmp/data that nobody owns; skipped (or
    failed, see skip_or_fail) where nobody cannot reach the binaries."""
    for binary in (STOKERD, os.path.join(os.path.dirname(STOKERD), "stoker-run")):
        if not others_may_read(binary):
            skip_or_fail(case, "a daemon running as nobody cannot reach %s: build Stoker where "
                         "others may enter (chmod o+x on each directory of the path)" % binary)
    case.tmp = tempfile.mkdtemp(prefix="stoker-e2e-")
    os.chmod(case.tmp, 0o711)
    case.data = os.path.join(case.tmp, "data")
    os.makedirs(case.data)
    daemon = NobodyDaemon(case.data, case.config)
    for root, dirs, files in os.walk(case.data):
        for name in [root] + [os.path.join(root, f) for f in files]:
            os.chown(name, NOBODY, NOBODY)
    case.daemon = daemon.start()
    case.project_path = JOBS


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root and setpriv to start stokerd as nobody")
class NonRootDaemonIsolationTest(IsolationCase):

    config = DEFAULT_CONFIG.replace(
        "default_unix_user: root\nallow_root_trainers: true\n", "") + "job_isolation: required\n"

    def setUp(self):
        start_as_nobody(self)

    def test_a_trainer_of_a_non_root_daemon_cannot_read_its_token_or_other_jobs(self):
        self.isolation_in_use()
        token = os.path.join(self.data, "token")
        self.assertEqual(os.stat(token).st_uid, NOBODY)
        self.assertEqual(stat.S_IMODE(os.stat(token).st_mode), 0o600)
        final, log, b_dir = self.attack()
        self.assertEqual(final["state"], "JOB_STATE_SUCCEEDED", log)
        for marker in ("MARK-", "A-LOG-SECRET", "A-FILE-SECRET", self.daemon.token, "SQLite"):
            self.assertNotIn(marker, log)
        for marker in ("OK-WROTE-MODEL", "OK-READ-BUCKET", "OK-REPORTED", b_dir):
            self.assertIn(marker, log)


if __name__ == "__main__":
    unittest.main()
