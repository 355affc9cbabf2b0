"""Images a node lacks are pulled from their registry (docs/containers.md,
"Pulls"): a real registry (Debian's docker-registry) on localhost serves a
small image this test builds and pushes; a job naming it pulls it before the
trainer starts and says how long the pull took in its events; a registry
that cannot be reached is refused at submit, an image the registry lacks
fails the job with the engine's words and the fix. Needs podman (with runc),
docker-registry and busybox-static; without them these tests skip (CI, with
STOKER_TEST_REQUIRE_ALL=1, fails instead)."""

import os
import shutil
import socket
import subprocess
import tempfile
import time

from harness import (DEFAULT_CONFIG, StokerTestCase, podman, podman_flags, skip_or_fail,
                     stokerd_refuses)

SETUP_ERROR = None
REGISTRY = None  # "127.0.0.1:PORT"
CLOSED = None  # "127.0.0.1:PORT" where nothing listens
REGISTRY_PROCESS = None
WORK = None
LOCAL = "localhost/stoker-e2e/pulled:%d" % os.getpid()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setUpModule():
    global SETUP_ERROR, REGISTRY, REGISTRY_PROCESS, WORK, CLOSED
    for tool, package in (("podman", "podman runc"), ("docker-registry", "docker-registry"),
                          ("busybox", "busybox-static")):
        if shutil.which(tool) is None:
            SETUP_ERROR = "%s is not installed (apt-get install %s)" % (tool, package)
            return
    WORK = tempfile.mkdtemp(prefix="stoker-registry-")
    port = free_port()
    REGISTRY = "127.0.0.1:%d" % port
    CLOSED = "127.0.0.1:%d" % free_port()
    config = os.path.join(WORK, "registry.yml")
    with open(config, "w") as f:
        f.write("version: 0.1\nlog: {level: warn}\nstorage:\n  filesystem:\n"
                "    rootdirectory: %s/store\nhttp:\n  addr: %s\n" % (WORK, REGISTRY))
    REGISTRY_PROCESS = subprocess.Popen(["docker-registry", "serve", config],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.time() > deadline or REGISTRY_PROCESS.poll() is not None:
                SETUP_ERROR = "docker-registry did not listen on " + REGISTRY
                return
            time.sleep(0.1)
    # A small image: a static busybox, its applets linked into /bin.
    ctx = os.path.join(WORK, "ctx")
    os.makedirs(ctx)
    shutil.copy(shutil.which("busybox"), os.path.join(ctx, "busybox"))
    with open(os.path.join(ctx, "Dockerfile"), "w") as f:
        f.write('FROM scratch\nCOPY busybox /bin/busybox\n'
                'RUN ["/bin/busybox", "--install", "-s", "/bin"]\n')
    r = podman("build", *podman_flags(), "-t", LOCAL, ctx, check=False)
    if r.returncode != 0:
        SETUP_ERROR = "podman build of the busybox image failed: " + r.stderr[-2000:]
        return
    r = podman("push", "--tls-verify=false", LOCAL, REGISTRY + "/e2e/busybox:v1", check=False)
    if r.returncode != 0:
        SETUP_ERROR = "podman push to docker-registry failed: " + r.stderr[-2000:]
        return
    podman("rmi", "--force", LOCAL, check=False)


def tearDownModule():
    if REGISTRY_PROCESS is not None:
        REGISTRY_PROCESS.terminate()
        REGISTRY_PROCESS.wait(timeout=30)
    if WORK:
        shutil.rmtree(WORK, ignore_errors=True)
    if shutil.which("podman") and REGISTRY:
        podman("rmi", "--force", LOCAL, REGISTRY + "/e2e/busybox:v1", check=False)


def job(name, image, command):
    return {"displayName": name, "jobSpec": {
        "workerPoolSpecs": [{"machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 1,
                             "containerSpec": {"imageUri": image, "command": command}}],
        "scheduling": {"maxRetries": 0}}}


class ImagePullTest(StokerTestCase):

    def setUp(self):
        if SETUP_ERROR:
            skip_or_fail(self, SETUP_ERROR)
        # The registry speaks plain HTTP and is on a loopback address: named
        # insecure in the config (so is the closed one, to be tried at all).
        self.config = DEFAULT_CONFIG + 'containers: {insecure_registries: ["%s", "%s"]}\n' % (
            REGISTRY, CLOSED)
        super().setUp()

    def events(self, job_id):
        return [e["reason"] for e in
                self.api("GET", self.project_path + "/" + job_id + "/events")[1]["events"]]

    def test_an_image_the_node_lacks_is_pulled_then_runs_and_the_pull_time_is_an_event(self):
        image = REGISTRY + "/e2e/busybox:v1"
        podman("rmi", "--force", image, check=False)
        j = self.submit(job("pulled", image, ["sh", "-c", "echo ran in busybox $CLOUD_ML_JOB_ID"]))
        self.assertEqual(self.wait_state(j, timeout=120)["state"], "JOB_STATE_SUCCEEDED",
                         self.stoker("jobs", "logs", j).stdout)
        self.assertIn("ran in busybox " + j, self.stoker("jobs", "logs", j).stdout)
        events = "\n".join(self.events(j))
        self.assertIn("runs in a container: image %s is not in podman's store and is pulled from %s"
                      % (image, REGISTRY), events)
        self.assertRegex(events, r"pulled image %s in [0-9]+\.[0-9] s" % image.replace(".", r"\."))
        self.assertEqual(podman("image", "exists", image, check=False).returncode, 0)
        # Now in the store: the next job runs it without a pull.
        again = self.submit(job("again", image, ["true"]))
        self.assertEqual(self.wait_state(again, timeout=60)["state"], "JOB_STATE_SUCCEEDED")
        self.assertNotIn("pulled image", "\n".join(self.events(again)))
        # Removed from the store while stokerd still remembers it there (for
        # 30 s): the engine pulls it again instead of failing the job.
        podman("rmi", "--force", image)
        gone = self.submit(job("gone", image, ["true"]))
        self.assertEqual(self.wait_state(gone, timeout=120)["state"], "JOB_STATE_SUCCEEDED",
                         self.stoker("jobs", "logs", gone).stdout)

    def test_an_image_the_registry_lacks_fails_the_job_with_the_engines_words_and_the_fix(self):
        image = REGISTRY + "/e2e/absent:v1"
        j = self.submit(job("absent", image, ["true"]))
        done = self.wait_state(j, timeout=120)
        self.assertEqual(done["state"], "JOB_STATE_FAILED")
        message = done["error"]["message"]
        self.assertIn("could not pull image " + image, message)
        self.assertIn("manifest unknown", message)  # the registry's own words, through podman
        self.assertIn("stoker images build -t " + image, message)
        self.assertEqual(self.containers_of(j), [])

    def test_a_registry_that_cannot_be_reached_is_refused_at_submit(self):
        closed = CLOSED  # nothing listens there
        status, body = self.api("POST", self.project_path,
                                job("nowhere", closed + "/e2e/busybox:v1", ["true"]))
        self.assertEqual(status, 400, body)
        message = body["error"]["message"]
        self.assertIn("workerPoolSpecs[0].containerSpec.imageUri", message)
        self.assertIn("its registry %s cannot be reached to pull it" % closed, message)
        self.assertIn("Connection refused", message)
        self.assertIn("stoker images build -t " + closed + "/e2e/busybox:v1", message)


class PullsOffTest(StokerTestCase):
    """containers.pull: never keeps every image to the node's store."""

    def setUp(self):
        if SETUP_ERROR:
            skip_or_fail(self, SETUP_ERROR)
        self.config = DEFAULT_CONFIG + "containers: {pull: never}\n"
        # Gone before the daemon starts: its image catalog sees a removal
        # made later only once the engine's event arrives (decision 0037).
        podman("rmi", "--force", REGISTRY + "/e2e/busybox:v1", check=False)
        super().setUp()

    def test_a_missing_image_is_refused_at_submit_without_a_pull(self):
        image = REGISTRY + "/e2e/busybox:v1"
        status, body = self.api("POST", self.project_path, job("off", image, ["true"]))
        self.assertEqual(status, 400, body)
        self.assertIn("pulls are off (containers.pull: never)", body["error"]["message"])
        self.assertNotEqual(podman("image", "exists", image, check=False).returncode, 0)

    def test_bad_pull_settings_stop_the_daemon_naming_the_key(self):
        err = stokerd_refuses(os.path.join(self.tmp, "a"),
                              DEFAULT_CONFIG + "containers: {pull: sometimes}\n")
        self.assertIn("containers.pull: must be missing", err)
        err = stokerd_refuses(os.path.join(self.tmp, "b"),
                              DEFAULT_CONFIG + "containers: {insecure_registries: localhost:5000}\n")
        self.assertIn("containers.insecure_registries: must be a list", err)
        err = stokerd_refuses(os.path.join(self.tmp, "c"),
                              DEFAULT_CONFIG + "containers: {registry: x}\n")
        self.assertIn("containers.registry: unknown key", err)


if __name__ == "__main__":
    import unittest
    unittest.main()
