"""Who may do what, end to end: a real stokerd and the real CLI.

Bearer tokens on every route, roles (admin, user, viewer), ownership of
jobs, revocation, the private token file, HTTPS with a self-signed
certificate, the refusal of plain HTTP on a non-loopback address, and
trainers that run as another account and see no daemon secret.
"""
import json
import os
import signal
import ssl
import stat
import subprocess
import tempfile
import unittest

from harness import (DEFAULT_CONFIG, STOKER, STOKERD, Daemon, StokerTestCase, container_job,
                     stokerd_refuses, wait_for)

JOBS = "/v1/projects/p/locations/l/customJobs"
# The harness keeps root trainers for the rest of the suite; these tests
# want the default: never root.
SECURE_CONFIG = DEFAULT_CONFIG.replace("default_unix_user: root\nallow_root_trainers: true\n", "")


class AuthTest(StokerTestCase):
    config = DEFAULT_CONFIG + """
inventory: {cpus: 16, memory_gb: 64, gpus: [{type: NVIDIA_TESLA_T4}]}
"""

    def add_user(self, name, role, unix_user=None):
        args = ["admin", "users", "add", name, "--role", role]
        if unix_user:
            args += ["--unix-user", unix_user]
        self.stoker(*args)
        token = self.stoker("admin", "users", "token", name).stdout.strip()
        self.assertTrue(token.startswith("stk_") and len(token) == 68, token)
        return token

    def as_user(self, token, *args, check=False):
        return self.stoker(*args, check=check, env={"STOKER_TOKEN": token})

    def test_requests_without_or_with_a_wrong_token_get_401(self):
        status, body = self.api("GET", JOBS, token="")
        self.assertEqual(status, 401, body)
        self.assertEqual(body["error"]["status"], "UNAUTHENTICATED")
        self.assertIn("stoker admin users token", body["error"]["message"])
        for wrong in ("stk_" + "0" * 64, "not-a-token", self.daemon.token + "0"):
            status, body = self.api("GET", JOBS, token=wrong)
            self.assertEqual(status, 401, (wrong, body))
        r = self.as_user("stk_" + "1" * 64, "jobs", "list")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("token is not valid", r.stderr)
        # The health check stays open: the CLI uses it to find the daemon.
        self.assertEqual(self.api("GET", "/healthz", token="")[0], 200)

    def test_token_file_is_private_and_survives_a_restart(self):
        path = os.path.join(self.data, "token")
        st = os.stat(path)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)
        self.assertEqual(st.st_uid, os.geteuid())
        token = self.daemon.token
        self.daemon.kill(signal.SIGTERM)
        self.daemon = Daemon(self.data, self.config).start()
        self.assertEqual(self.daemon.token, token)
        # Made world-readable, it is treated as leaked: revoked and replaced.
        os.chmod(path, 0o644)
        self.daemon.kill(signal.SIGTERM)
        self.daemon = Daemon(self.data, self.config).start()
        self.assertNotEqual(self.daemon.token, token)
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        self.assertEqual(self.api("GET", JOBS, token=token)[0], 401)
        self.assertEqual(self.api("GET", JOBS)[0], 200)

    def test_the_cli_reads_the_token_file_of_stoker_home(self):
        home_env = {"STOKER_HOME": self.data, "STOKER_TOKEN": ""}
        r = subprocess.run([STOKER, "admin", "whoami"], capture_output=True, text=True,
                           env=dict(os.environ, **home_env), timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("(role admin", r.stdout)

    def test_viewers_read_everything_and_change_nothing(self):
        viewer = self.add_user("vic", "viewer")
        job = self.submit(container_job("admins", "sleep 30"))
        self.assertEqual(self.as_user(viewer, "jobs", "describe", job).returncode, 0)
        listed = self.as_user(viewer, "--format", "json", "jobs", "list", check=True).stdout
        self.assertIn('"admins"', listed)
        status, body = self.api("POST", JOBS, container_job("mine", "true"), token=viewer)
        self.assertEqual(status, 403, body)
        self.assertIn("role viewer", body["error"]["message"])
        r = self.as_user(viewer, "jobs", "cancel", job)
        self.assertNotEqual(r.returncode, 0)
        status, body = self.api("POST", JOBS + "/" + job + ":cancel", token=viewer)
        self.assertEqual(status, 403, body)
        self.assertIn(self.job(job)["state"], ("JOB_STATE_PENDING", "JOB_STATE_RUNNING"))
        self.assertEqual(self.api("POST", "/storage/v1/b", {"name": "vbucket"}, token=viewer)[0], 403)
        self.assertEqual(self.api("GET", "/v1/admin/users", token=viewer)[0], 403)
        self.stoker("jobs", "cancel", job)

    def test_users_see_and_cancel_only_their_own_jobs_and_admins_all(self):
        alice = self.add_user("alice", "user")
        bob = self.add_user("bob", "user")
        status, body = self.api("POST", JOBS, container_job("alices", "sleep 60"), token=alice)
        self.assertEqual(status, 200, body)
        job = body["name"].rsplit("/", 1)[1]
        self.assertEqual(self.api("GET", JOBS + "/" + job, token=alice)[0], 200)
        # Bob: not found, whatever he tries; his list does not show it.
        for method, path in (("GET", ""), ("GET", "/logs"), ("GET", "/events"),
                             ("POST", ":cancel")):
            status, body = self.api(method, JOBS + "/" + job + path, token=bob)
            self.assertEqual(status, 404, (path, body))
        self.assertEqual(self.api("GET", JOBS, token=bob)[1].get("customJobs", []), [])
        r = self.as_user(bob, "jobs", "cancel", job)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertEqual(self.job(job)["state"] in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED"),
                         False)
        # Alice lists her own; the admin sees it and may cancel it.
        names = [j["displayName"] for j in self.api("GET", JOBS, token=alice)[1]["customJobs"]]
        self.assertEqual(names, ["alices"])
        self.stoker("jobs", "cancel", job)
        self.wait_state(job, ("JOB_STATE_CANCELLED",))
        # Studies are owned the same way.
        study = {"displayName": "s", "maxTrialCount": 1, "parallelTrialCount": 1,
                 "studySpec": {"metrics": [{"metricId": "m", "goal": "MAXIMIZE"}],
                               "parameters": [{"parameterId": "x",
                                               "doubleValueSpec": {"minValue": 0, "maxValue": 1}}]},
                 "trialJobSpec": container_job("t", "true")["jobSpec"]}
        studies = "/v1/projects/p/locations/l/hyperparameterTuningJobs"
        status, body = self.api("POST", studies, study, token=alice)
        self.assertEqual(status, 200, body)
        sid = body["name"].rsplit("/", 1)[1]
        self.assertEqual(self.api("GET", studies + "/" + sid, token=bob)[0], 404)
        self.assertEqual(self.api("POST", studies + "/" + sid + ":cancel", token=bob)[0], 404)
        self.assertEqual(self.api("GET", studies, token=bob)[1]["hyperparameterTuningJobs"], [])
        self.assertEqual(self.api("GET", studies + "/" + sid, token=alice)[0], 200)

    def test_the_queue_hides_other_users_job_names(self):
        # One GPU, held by the admin's job: alice's GPU job waits in the queue.
        alice = self.add_user("alice", "user")
        bob = self.add_user("bob", "user")
        blocker = self.submit(container_job("blocker", "sleep 60", accelerator=("NVIDIA_TESLA_T4", 1)))
        status, body = self.api("POST", JOBS, container_job(
            "alices-secret-project", "true", accelerator=("NVIDIA_TESLA_T4", 1)), token=alice)
        self.assertEqual(status, 200, body)
        job = body["name"].rsplit("/", 1)[1]

        def entry(token):
            jobs = self.api("GET", "/v1/stoker/queue", token=token)[1]["jobs"]
            return next((j for j in jobs if j["jobId"] == job), None)
        self.assertEqual(wait_for(lambda: entry(alice), 20, "alice's job in the queue")["displayName"],
                         "alices-secret-project")
        self.assertEqual(entry(self.daemon.token)["displayName"], "alices-secret-project")
        seen_by_bob = entry(bob)
        self.assertEqual(seen_by_bob["user"], "alice")  # who is ahead is public, what is not
        self.assertNotIn("displayName", seen_by_bob)
        self.assertNotIn("alices-secret-project", self.as_user(bob, "queue", check=True).stdout)
        self.stoker("jobs", "cancel", job)
        self.stoker("jobs", "cancel", blocker)

    def test_revoked_tokens_and_removed_users_get_401(self):
        alice = self.add_user("alice", "user")
        self.assertEqual(self.as_user(alice, "jobs", "list").returncode, 0)
        users = json.loads(self.stoker("--format", "json", "admin", "users", "list").stdout)
        ids = [t["id"] for u in users["users"] if u["name"] == "alice" for t in u["tokens"]]
        self.assertEqual(len(ids), 1)
        self.assertTrue(alice.startswith("stk_"))
        self.stoker("admin", "users", "revoke", ids[0])
        self.assertEqual(self.api("GET", JOBS, token=alice)[0], 401)
        second = self.stoker("admin", "users", "token", "alice").stdout.strip()
        self.assertEqual(self.api("GET", JOBS, token=second)[0], 200)
        self.stoker("admin", "users", "remove", "alice")
        self.assertEqual(self.api("GET", JOBS, token=second)[0], 401)
        listed = self.stoker("admin", "users", "list").stdout
        self.assertNotIn("alice", listed)

    def test_only_admins_manage_users(self):
        alice = self.add_user("alice", "user")
        r = self.as_user(alice, "admin", "users", "add", "mallory", "--role", "admin")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("only admins", r.stderr)
        self.assertEqual(self.api("POST", "/v1/admin/users/alice/tokens", token=alice)[0], 403)
        r = self.stoker("admin", "users", "add", "Bad Name", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("not a valid user name", r.stderr)


class TlsAndListenTest(unittest.TestCase):
    """Daemons with their own configs: HTTPS, and non-loopback addresses."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stoker-e2e-tls-")
        self.daemons = []

    def tearDown(self):
        for d in self.daemons:
            d.kill(signal.SIGTERM)
        subprocess.run(["rm", "-rf", self.tmp], check=False)

    def cert(self):
        cert, key = os.path.join(self.tmp, "cert.pem"), os.path.join(self.tmp, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                        "-keyout", key, "-out", cert], check=True, capture_output=True)
        return cert, key

    def test_https_listener_serves_the_cli_with_ca_file(self):
        cert, key = self.cert()
        data = os.path.join(self.tmp, "data")
        os.makedirs(data)
        d = Daemon(data, DEFAULT_CONFIG + "tls_cert_file: %s\ntls_key_file: %s\n" % (cert, key))
        d.ssl_context = ssl.create_default_context(cafile=cert)
        self.daemons.append(d.start())
        self.assertTrue(d.url.startswith("https://127.0.0.1:"), d.url)
        env = dict(os.environ, STOKER_TOKEN=d.token, STOKER_HOME=os.path.join(self.tmp, "h"))
        env.pop("STOKER_CA_FILE", None)
        run = lambda *a, **kw: subprocess.run([STOKER, "--server", d.url] + list(a),
                                              capture_output=True, text=True, timeout=60,
                                              env=dict(env, **kw))
        r = run("--ca-file", cert, "admin", "whoami")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("role admin", r.stdout)
        r = run("--ca-file", cert, "storage", "mb", "gs://tlsbucket")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run("storage", "ls", STOKER_CA_FILE=cert)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("tlsbucket", r.stdout)
        # Not trusted: refused, with the fix in the message.
        r = run("jobs", "list")
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertIn("--ca-file", r.stderr)
        # Plain HTTP to the TLS port gets no answer.
        plain = subprocess.run([STOKER, "--server", d.url.replace("https://", "http://"), "jobs",
                                "list"], capture_output=True, text=True, timeout=60, env=env)
        self.assertNotEqual(plain.returncode, 0)

    def test_plain_http_on_a_non_loopback_address_is_refused(self):
        data = os.path.join(self.tmp, "d1")
        stderr = stokerd_refuses(data, listen="0.0.0.0:0")
        self.assertIn("tls_cert_file", stderr)
        self.assertIn("allow_insecure_http", stderr)
        # With the explicit opt-out it starts.
        with open(os.path.join(data, "config.yaml"), "w") as f:
            f.write("allow_insecure_http: true\n")
        proc = subprocess.Popen([STOKERD, "--data-dir", data, "--listen", "0.0.0.0:0"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: os.path.exists(os.path.join(data, "stokerd.addr")), 20,
                     "stokerd to listen on 0.0.0.0")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)


class TrainerIsolationTest(StokerTestCase):
    """Replicas see no daemon secret and, under a root daemon, run as the
    user's mapped account in directories no other account can read."""

    config = SECURE_CONFIG
    LEAK = "stk_" + "5" * 64

    def setUp(self):
        # stokerd inherits our environment: plant secrets in it.
        os.environ["STOKER_TOKEN"] = self.LEAK
        try:
            super().setUp()
        finally:
            del os.environ["STOKER_TOKEN"]
        # The trainer account must be able to walk down to its replica dir.
        os.chmod(self.tmp, 0o711)
        os.chmod(self.data, 0o711)

    def test_trainer_environment_holds_no_secret(self):
        job = self.submit(container_job("env", "env; id"))
        final = self.wait_state(job)
        log = self.stoker("jobs", "logs", job).stdout
        self.assertEqual(final["state"], "JOB_STATE_SUCCEEDED", log)
        self.assertIn("CLOUD_ML_JOB_ID=" + job, log)
        for secret in (self.LEAK, self.daemon.token, "STOKER_TOKEN", os.path.join(self.data, "token")):
            self.assertNotIn(secret, log)
        self.assertNotIn("stk_", log)

    @unittest.skipUnless(os.geteuid() == 0, "needs a root daemon to switch accounts")
    def test_root_daemon_runs_replicas_as_the_mapped_account(self):
        self.stoker("admin", "users", "add", "alice", "--role", "user", "--unix-user", "daemon")
        alice = self.stoker("admin", "users", "token", "alice").stdout.strip()
        # The admin (root, no unix_user) gets the default account, nobody:
        # never root unless allow_root_trainers.
        first = self.submit(container_job("first", "id -u; echo secret > mine.txt"))
        self.assertEqual(self.wait_state(first)["state"], "JOB_STATE_SUCCEEDED")
        self.assertEqual(self.stoker("jobs", "logs", first).stdout.split()[0], "65534")
        # The replica directory holds the supervisor's files: root's, readable
        # by the trainer's group only. The trainer's own directory below it
        # (its working directory) is the trainer's and private; the job's
        # directory above stays root's (enterable, not listable).
        st = os.stat(self.replica_dir(first))
        self.assertEqual((st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)), (0, 65534, 0o750))
        st = os.stat(os.path.join(self.replica_dir(first), "work"))
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (65534, 0o700))
        st = os.stat(os.path.join(self.data, "jobs", first))
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (0, 0o711))
        self.assertEqual(
            os.stat(os.path.join(self.replica_dir(first), "work", "mine.txt")).st_uid, 65534)
        # Alice's replicas run as her account, 'daemon' (uid 1), and cannot
        # list the jobs directory (0711) to find others' jobs.
        status, body = self.api("POST", JOBS, container_job(
            "second", "id -u; ls %s/jobs && echo LISTED; true" % self.data), token=alice)
        self.assertEqual(status, 200, body)
        second = body["name"].rsplit("/", 1)[1]
        self.assertEqual(self.wait_state(second)["state"], "JOB_STATE_SUCCEEDED")
        log = self.stoker("jobs", "logs", second).stdout
        self.assertEqual(log.split()[0], "1", log)
        self.assertNotIn("LISTED", log)

    @unittest.skipUnless(os.geteuid() == 0, "needs a root daemon to switch accounts")
    def test_replicas_of_another_account_cannot_read_a_jobs_directory(self):
        # The admin's job runs as nobody; one mapped to 'daemon' (uid 1)
        # tries to read its files.
        first = self.submit(container_job("first", "echo secret > mine.txt; sleep 30"))
        mine = os.path.join(self.replica_dir(first), "work", "mine.txt")
        wait_for(lambda: os.path.exists(mine), 30, "the first job to write its file")
        self.stoker("admin", "users", "add", "dave", "--role", "user", "--unix-user", "daemon")
        other = self.stoker("admin", "users", "token", "dave").stdout.strip()
        status, body = self.api("POST", JOBS, container_job(
            "snoop", "id -u; cat %s && echo READ-OTHER; cat %s/output.log && echo READ-LOG; true"
            % (mine, self.replica_dir(first))),
            token=other)
        self.assertEqual(status, 200, body)
        snoop = body["name"].rsplit("/", 1)[1]
        self.assertEqual(self.wait_state(snoop)["state"], "JOB_STATE_SUCCEEDED")
        log = self.stoker("jobs", "logs", snoop).stdout
        # Refused by the account check, or not even there (job_isolation).
        self.assertRegex(log, "Permission denied|No such file or directory")
        self.assertNotIn("READ-OTHER", log)
        self.assertNotIn("READ-LOG", log)
        self.stoker("jobs", "cancel", first)

    @unittest.skipUnless(os.geteuid() == 0, "needs a root daemon")
    def test_root_trainers_are_refused_unless_allowed(self):
        self.stoker("admin", "users", "add", "rooty", "--role", "user", "--unix-user", "root")
        token = self.stoker("admin", "users", "token", "rooty").stdout.strip()
        status, body = self.api("POST", JOBS, container_job("asroot", "id -u"), token=token)
        self.assertEqual(status, 200, body)
        final = self.wait_state(body["name"].rsplit("/", 1)[1])
        self.assertEqual(final["state"], "JOB_STATE_FAILED")
        self.assertIn("allow_root_trainers", final["error"]["message"])


if __name__ == "__main__":
    unittest.main()
