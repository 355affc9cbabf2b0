"""Test harness: a real stokerd in a temp dir, the real CLI as a subprocess.

Every test gets its own data dir and daemon on a free port (port 0). Waits
poll with a deadline; nothing sleeps to synchronise.
"""
import glob
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

BIN = os.environ.get("STOKER_BIN_DIR") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "bin")
SOURCE = os.environ.get("STOKER_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
STOKER = os.path.join(BIN, "stoker")
STOKERD = os.path.join(BIN, "stokerd")
IMAGE = "us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.2-1.py310:latest"

# As root, stokerd runs replicas as `nobody` unless told otherwise; the
# tests' temp dirs are private to root, so the suite keeps the daemon's
# account (test_auth.py checks the switch with a config of its own).
DEFAULT_CONFIG = """
default_unix_user: root
allow_root_trainers: true
images:
  - match: "local/sh"
    python: /bin/sh
cancel_grace_seconds: 1
poll_interval_ms: 20
cpu_oversubscription: 16
"""


def read_text(path):
    """The whole text of the file at `path` (closed before it returns)."""
    with open(path) as f:
        return f.read()


def wait_for(predicate, timeout=30.0, what="condition"):
    """Polls `predicate` until it returns a truthy value; fails after `timeout`."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.0fs waiting for %s" % (timeout, what))
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def container_job(name, script, machine="e2-standard-2", extra_pool=None, env=None,
                  timeout=None, accelerator=None, pools=None):
    """A CustomJob whose primary pool runs `sh -c script`."""
    pool = {
        "machineSpec": {"machineType": machine},
        "replicaCount": 1,
        "containerSpec": {"imageUri": IMAGE, "command": ["/bin/sh", "-c", script]},
    }
    if accelerator:
        pool["machineSpec"]["acceleratorType"] = accelerator[0]
        pool["machineSpec"]["acceleratorCount"] = accelerator[1]
    if env:
        pool["containerSpec"]["env"] = [{"name": k, "value": v} for k, v in env]
    job = {"displayName": name, "jobSpec": {"workerPoolSpecs": [pool] + (pools or [])}}
    if timeout:
        job["jobSpec"]["scheduling"] = {"timeout": timeout}
    return job


class Daemon:
    """A stokerd process on a temp data dir."""

    def __init__(self, data_dir, config=DEFAULT_CONFIG):
        self.data_dir = data_dir
        self.proc = None
        with open(os.path.join(data_dir, "config.yaml"), "w") as f:
            f.write(config)

    def start(self):
        addr = os.path.join(self.data_dir, "stokerd.addr")
        if os.path.exists(addr):
            os.unlink(addr)
        self.log = open(os.path.join(self.data_dir, "stokerd.test.log"), "ab")
        self.proc = subprocess.Popen(
            [STOKERD, "--data-dir", self.data_dir, "--listen", "127.0.0.1:0"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.url = wait_for(lambda: self._healthy_url(addr), 20, "stokerd to answer /healthz")
        return self

    def _healthy_url(self, addr):
        if self.proc.poll() is not None:
            raise AssertionError("stokerd exited with %s; log:\n%s" % (
                self.proc.returncode, read_text(self.log.name)[-3000:]))
        try:
            url = read_text(addr).strip()
            with urllib.request.urlopen(url + "/healthz", timeout=2, context=self.ssl_context) as r:
                return url if r.status == 200 else None
        except (OSError, urllib.error.URLError):
            return None

    ssl_context = None  # for https daemons: an ssl.SSLContext that trusts their certificate

    @property
    def token(self):
        """The local admin's token, which stokerd writes into its data dir."""
        with open(os.path.join(self.data_dir, "token")) as f:
            return f.read().strip()

    def kill(self, sig=signal.SIGKILL):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)
        self.log.close()


def slurm_jobs_of(data_dir, squeue_args=()):
    """Ids of the Slurm jobs of the daemon on `data_dir` (their comment ends
    with its instance), in the states squeue shows with `squeue_args`: other
    daemons may share the cluster."""
    instance = read_text(os.path.join(data_dir, "slurm-instance")).strip()
    r = subprocess.run(["squeue", "-h"] + list(squeue_args) + ["-o", "%i|%k"],
                       capture_output=True, text=True)
    return [l.split("|")[0] for l in r.stdout.split() if l.endswith(":" + instance)]


def cancel_slurm_jobs_of(data_dir):
    """scancel the daemon's Slurm jobs that are still queued or running."""
    try:
        ids = slurm_jobs_of(data_dir)
        if ids:
            subprocess.run(["scancel"] + ids, check=False)
    except OSError:
        pass


def main():
    """unittest.main for a test file that CI runs directly (the Slurm
    suites): with STOKER_TEST_FAIL_ON_SKIP=1 a skipped test fails the run."""
    program = unittest.main(verbosity=2, exit=False)
    result = program.result
    if os.environ.get("STOKER_TEST_FAIL_ON_SKIP") == "1" and result.skipped:
        for test, why in result.skipped:
            print("SKIPPED (not allowed here): %s: %s" % (test.id(), why), file=sys.stderr)
        sys.exit(1)
    sys.exit(0 if result.wasSuccessful() else 1)


def skip_or_fail(case, why):
    """Skips `case` because this machine lacks what it needs (`why`), unless
    STOKER_TEST_REQUIRE_ALL=1 (CI sets it): then it fails, so that a CI run
    cannot pass without having run it, e.g. when a regression makes job
    isolation look unavailable."""
    if os.environ.get("STOKER_TEST_REQUIRE_ALL") == "1":
        case.fail(why + " (STOKER_TEST_REQUIRE_ALL=1 forbids skipping)")
    case.skipTest(why)


BASE_IMAGE = "localhost/stoker-base:bookworm"  # scripts/container-base-image.sh


def podman(*args, check=True, timeout=600):
    return subprocess.run(["podman"] + list(args), capture_output=True, text=True,
                          check=check, timeout=timeout)


def fnv1a_hex(text):
    """Fnv1aHex (src/common/fnv1a.h): FNV-1a, 64 bits, 16 hex digits."""
    h = 1469598103934665603
    for b in text.encode():
        h ^= b
        h = (h * 1099511628211) % (1 << 64)
    return "%016x" % h


def instance_tag(data_dir):
    """InstanceTag (src/server/launch_builder.cc): 8 hex digits of the FNV-1a
    hash of the daemon's absolute data directory; its containers' names end
    in it."""
    return fnv1a_hex(os.path.abspath(data_dir))[:8]


def cgroups_of(data_dir, job_id):
    """The cgroup directories, in every hierarchy, named for a replica of one
    job (ReplicaCgroupName, src/replica/replica_cgroup.cc): the replica's own
    and those a container engine made at its --cgroup-parent."""
    found = []
    for replica in glob.glob(os.path.join(data_dir, "jobs", job_id, "**", "workerpool*"),
                             recursive=True):
        cookie = os.path.realpath(replica)
        tail = "".join(c for c in os.path.basename(cookie) if c.isalnum() or c in "-_.")[:44]
        name = "r-" + fnv1a_hex(cookie) + ("-" + tail if tail else "")
        found += glob.glob("/sys/fs/cgroup/**/stoker/" + name, recursive=True)
    return sorted(found)


def containers_of(data_dir, job_id):
    """The names of the engine's containers (running or not) of one job of
    the daemon whose data directory is `data_dir`."""
    r = podman("ps", "--all", "--filter",
               "name=^stoker-%s-.*-%s$" % (job_id, instance_tag(data_dir)),
               "--format", "{{.Names}}")
    return r.stdout.split()


def podman_flags():
    """The --ulimit flags a container needs here (as stoker-run gives them)."""
    import resource
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
    nproc = [min(v, 32768) if v != resource.RLIM_INFINITY else 32768
             for v in resource.getrlimit(resource.RLIMIT_NPROC)]
    return ["--ulimit=nofile=%d:%d" % nofile, "--ulimit=nproc=%d:%d" % tuple(nproc)]


def podman_setup_error():
    """None when podman works and has the base image (made here by
    scripts/container-base-image.sh when missing); else why not."""
    if shutil.which("podman") is None:
        return "podman is not installed (apt-get install podman runc)"
    r = podman("info", check=False)
    if r.returncode != 0:
        return "podman is installed but `podman info` fails: " + r.stderr[-500:]
    if podman("image", "exists", BASE_IMAGE, check=False).returncode != 0:
        script = os.path.join(SOURCE, "scripts", "container-base-image.sh")
        r = subprocess.run([script, BASE_IMAGE], capture_output=True, text=True, timeout=1200)
        if r.returncode != 0:
            return "cannot make %s: %s" % (BASE_IMAGE, r.stderr[-2000:])
    return None


def others_may_read(path):
    """Whether an account other than the owner's may reach `path` (a
    trainer running as nobody importing Stoker's Python helpers, a daemon
    started as nobody running the binaries): every directory on the way
    searchable by others and `path` readable by them."""
    path = os.path.abspath(path)
    if not os.path.exists(path) or not os.stat(path).st_mode & stat.S_IROTH:
        return False
    while path != os.path.dirname(path):
        path = os.path.dirname(path)
        if not os.stat(path).st_mode & stat.S_IXOTH:
            return False
    return True


def stokerd_refuses(data_dir, config=None, listen="127.0.0.1:0", timeout=30, args=()):
    """Runs stokerd on `data_dir` (writing `config` to its config.yaml first,
    when given), expects it to exit non-zero at once and returns its stderr:
    the message a user gets for a bad setup."""
    os.makedirs(data_dir, exist_ok=True)
    if config is not None:
        with open(os.path.join(data_dir, "config.yaml"), "w") as f:
            f.write(config)
    try:
        r = subprocess.run([STOKERD, "--data-dir", data_dir, "--listen", listen] + list(args),
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:  # it started and kept serving (run() killed it)
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr
        raise AssertionError("stokerd kept running where it should refuse:\n" + (err or ""))
    if r.returncode == 0:
        raise AssertionError("stokerd exited 0 where it should refuse:\n" + r.stderr)
    return r.stderr


class StokerTestCase(unittest.TestCase):
    """Starts a daemon per test; `stoker(...)` runs the CLI against it."""

    config = DEFAULT_CONFIG

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stoker-e2e-")
        self.data = os.path.join(self.tmp, "data")
        os.makedirs(self.data)
        self.daemon = Daemon(self.data, self.config).start()
        self.project_path = "/v1/projects/p/locations/l/customJobs"

    def tearDown(self):
        self.daemon.kill(signal.SIGTERM)
        # No replica of any test may outlive it: cancel supervisors still running
        # (SIGTERM stops their whole process tree), then make sure.
        # Warm interpreters (stoker_zygote.py, docs/warm-starts.md) leave on
        # their own once their socket is gone; the pattern takes them too.
        pattern = "(stoker-run|stoker_zygote).*" + self.data
        subprocess.run(["pkill", "-TERM", "-f", pattern], check=False)
        try:
            wait_for(lambda: subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode != 0,
                     10, "supervisors to stop")
        except AssertionError:
            subprocess.run(["pkill", "-KILL", "-f", pattern], check=False)
        # STOKER_TEST_KEEP=1 keeps the data dir (daemon log, replica dirs)
        # of a failed test for a post-mortem.
        outcome = getattr(self, "_outcome", None)
        failed = outcome is not None and not outcome.success
        if failed and os.environ.get("STOKER_TEST_KEEP") == "1":
            print("kept " + self.tmp, file=sys.stderr)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def stoker(self, *args, check=True, env=None, timeout=120, cwd=None):
        full_env = dict(os.environ)
        full_env.pop("STOKER_SERVER", None)
        full_env["STOKER_HOME"] = os.path.join(self.tmp, "no-home")
        full_env["STOKER_TOKEN"] = self.daemon.token
        if env:
            full_env.update(env)
        cmd = [STOKER, "--server", self.daemon.url, "--project", "p", "--region", "l"] + list(args)
        r = subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=timeout,
                           cwd=cwd)
        if check and r.returncode != 0:
            raise AssertionError("%s failed (%d):\n%s\n%s" % (cmd, r.returncode, r.stdout, r.stderr))
        return r

    def api(self, method, path, body=None, raw=None, token=None):
        """Calls the REST API as the local admin (or with `token`; "" for
        none); returns (status, parsed JSON)."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        headers = {"content-type": "application/json"}
        token = self.daemon.token if token is None else token
        if token:
            headers["authorization"] = "Bearer " + token
        req = urllib.request.Request(self.daemon.url + path, data=data, method=method,
                                     headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def submit(self, job):
        status, body = self.api("POST", self.project_path, job)
        self.assertEqual(status, 200, body)
        return body["name"].rsplit("/", 1)[1]

    def add_user(self, name, role="user"):
        """Adds a user with the CLI; returns their API token."""
        self.stoker("admin", "users", "add", name, "--role", role)
        return self.stoker("admin", "users", "token", name).stdout.strip()

    def submit_as(self, token, job):
        """Submits `job` as the user whose token is given; returns its id."""
        status, body = self.api("POST", self.project_path, job, token=token)
        self.assertEqual(status, 200, body)
        return body["name"].rsplit("/", 1)[1]

    def job(self, job_id):
        status, body = self.api("GET", self.project_path + "/" + job_id)
        self.assertEqual(status, 200, body)
        return body

    def wait_state(self, job_id, states=("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED",
                                          "JOB_STATE_CANCELLED"), timeout=60):
        return wait_for(lambda: (lambda j: j if j["state"] in states else None)(self.job(job_id)),
                        timeout, "job %s to reach %s" % (job_id, states))

    def containers_of(self, job_id):
        return containers_of(self.data, job_id)

    def cgroups_of(self, job_id):
        return cgroups_of(self.data, job_id)

    def replica_dir(self, job_id, replica="workerpool0-0"):
        return os.path.join(self.data, "jobs", job_id, replica)

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path
