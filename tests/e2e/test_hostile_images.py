"""Image names are data, never engine arguments (issue #28, docs/security.md
"Image references"): a transport or an option in any image field is refused
before root's container engine sees it, with the field and the grammar in
the message, and the engine never opens the store path the name chose (no
directory, no mount). A registry at a loopback address that the config
does not trust is refused at submit, with no connection made to it.

Needs podman (root's engine, as stokerd finds it); skips without it.
"""
import os
import shutil
import socket

from harness import StokerTestCase, container_job, main, skip_or_fail

GRAMMAR = "expected [HOST[:PORT]/]NAME[:TAG][@sha256:DIGEST]"


class HostileImageNameTest(StokerTestCase):

    def setUp(self):
        if shutil.which("podman") is None:
            skip_or_fail(self, "podman is not installed (apt-get install podman runc)")
        super().setUp()
        self.store = os.path.join(self.tmp, "store")
        self.runroot = os.path.join(self.tmp, "run")
        # Each would make root's podman read something other than a name:
        # a second image store at a path of the user's choosing, a
        # registry by transport, an archive, an option.
        self.hostile = [
            "containers-storage:[overlay@%s+%s]localhost/x:1" % (self.store, self.runroot),
            "docker://localhost/x:1",
            "oci-archive:%s/x.tar" % self.tmp,
            "-v",
        ]
        self.mounts_before = self.mounts_under_tmp()

    def mounts_under_tmp(self):
        with open("/proc/self/mountinfo") as f:
            return [line for line in f if self.tmp in line]

    def assert_refused(self, message, field, name):
        self.assertIn(field, message)
        self.assertIn("is not an image reference", message)
        self.assertIn(GRAMMAR, message)
        self.assertIn(name, message)
        self.assertFalse(os.path.exists(self.store), "the engine opened the store " + self.store)
        self.assertFalse(os.path.exists(self.runroot))
        self.assertEqual(self.mounts_under_tmp(), self.mounts_before)

    def assert_api_refuses(self, path, body, field, name):
        status, reply = self.api("POST", path, body)
        self.assertEqual(status, 400, reply)
        self.assert_refused(reply["error"]["message"], field, name)

    def assert_cli_refuses(self, args, field, name, cwd=None):
        r = self.stoker(*args, check=False, cwd=cwd)
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assert_refused(r.stderr, field, name)

    def test_vertex_custom_jobs_refuse_a_transport_in_every_image_field(self):
        for name in self.hostile:
            with self.subTest(name=name):
                machine = {"machineType": "e2-standard-2"}
                self.assert_api_refuses(self.project_path, {
                    "displayName": "c", "jobSpec": {"workerPoolSpecs": [{
                        "machineSpec": machine, "replicaCount": 1,
                        "containerSpec": {"imageUri": name, "command": ["true"]}}]}},
                    "workerPoolSpecs[0].containerSpec.imageUri", name)
                self.assert_api_refuses(self.project_path, {
                    "displayName": "p", "jobSpec": {"workerPoolSpecs": [{
                        "machineSpec": machine, "replicaCount": 1,
                        "pythonPackageSpec": {"executorImageUri": name,
                                              "packageUris": ["gs://b/p.tar.gz"],
                                              "pythonModule": "trainer.task"}}]}},
                    "workerPoolSpecs[0].pythonPackageSpec.executorImageUri", name)
                self.assert_api_refuses("/v1/projects/p/locations/l/hyperparameterTuningJobs", {
                    "displayName": "tune", "maxTrialCount": 1, "parallelTrialCount": 1,
                    "studySpec": {"metrics": [{"metricId": "m", "goal": "MAXIMIZE"}],
                                  "parameters": [{"parameterId": "x", "doubleValueSpec": {
                                      "minValue": 0.0, "maxValue": 1.0}}]},
                    "trialJobSpec": {"workerPoolSpecs": [{
                        "machineSpec": machine, "replicaCount": 1,
                        "containerSpec": {"imageUri": name, "command": ["true"]}}]}},
                    "trialJobSpec.workerPoolSpecs[0].containerSpec.imageUri", name)
        self.assertEqual(self.api("GET", self.project_path)[1].get("customJobs", []), [])

    def test_ai_platform_jobs_refuse_a_transport_in_the_master_image(self):
        for i, name in enumerate(self.hostile):
            with self.subTest(name=name):
                self.assert_api_refuses("/v1/projects/p/jobs", {
                    "jobId": "hostile_%d" % i, "trainingInput": {
                        "scaleTier": "CUSTOM", "masterType": "n1-standard-4", "region": "l",
                        "masterConfig": {"imageUri": name}}},
                    "masterConfig.imageUri", name)
                self.assert_cli_refuses(
                    ["jobs", "submit", "training", "hostile_cli_%d" % i, "--scale-tier=custom",
                     "--master-machine-type=n1-standard-4", "--master-image-uri=" + name],
                    "imageUri", name)

    def test_the_cli_refuses_a_transport_in_every_image_argument(self):
        pkg = os.path.join(self.tmp, "pkg")
        os.makedirs(pkg)
        with open(os.path.join(pkg, "t.py"), "w") as f:
            f.write("print('ran')\n")
        with open(os.path.join(pkg, "Dockerfile"), "w") as f:
            f.write("FROM scratch\nCOPY t.py /t.py\n")
        tarball = os.path.join(self.tmp, "rootfs.tar")
        open(tarball, "wb").close()
        for name in self.hostile:
            with self.subTest(name=name):
                self.assert_cli_refuses(
                    ["ai", "custom-jobs", "create", "--display-name=cli",
                     "--worker-pool-spec=machine-type=n1-standard-4,replica-count=1,"
                     "container-image-uri=" + name], "container-image-uri", name)
                self.assert_cli_refuses(
                    ["ai", "custom-jobs", "create", "--display-name=cli",
                     "--worker-pool-spec=machine-type=n1-standard-4,replica-count=1,"
                     "executor-image-uri=%s,python-module=trainer.task" % name],
                    "executor-image-uri", name)
                self.assert_cli_refuses(
                    ["ai", "custom-jobs", "local-run", "--executor-image-uri=" + name,
                     "--local-package-path=" + pkg, "--script=t.py"],
                    "--executor-image-uri", name)
                self.assert_cli_refuses(["images", "import", "--", tarball, name], "IMAGE", name)
                self.assert_cli_refuses(["images", "rm", "--", name], "IMAGE", name)
                self.assert_cli_refuses(["images", "build", "--tag=" + name, pkg], "-t", name)

    def test_a_vertex_prebuilt_name_still_runs(self):
        # The parser refuses nothing a user writes for a real image: the
        # prebuilt name reaches the interpreter rules and runs.
        j = self.submit(container_job("ok", "echo ran"))
        self.assertEqual(self.wait_state(j)["state"], "JOB_STATE_SUCCEEDED")


class PrivateRegistryTest(StokerTestCase):
    """containers.pull is on (the default); no registry is trusted."""

    def setUp(self):
        if shutil.which("podman") is None:
            skip_or_fail(self, "podman is not installed (apt-get install podman runc)")
        super().setUp()
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.listener.setblocking(False)
        self.addCleanup(self.listener.close)

    def connected(self):
        try:
            self.listener.accept()[0].close()
            return True
        except BlockingIOError:
            return False

    def test_a_registry_on_a_loopback_address_is_refused_with_the_fix(self):
        registry = "127.0.0.1:%d" % self.listener.getsockname()[1]
        image = registry + "/e2e/x:1"
        status, body = self.api("POST", self.project_path, {
            "displayName": "loop", "jobSpec": {"workerPoolSpecs": [{
                "machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 1,
                "containerSpec": {"imageUri": image, "command": ["true"]}}]}})
        self.assertEqual(status, 400, body)
        message = body["error"]["message"]
        self.assertIn("workerPoolSpecs[0].containerSpec.imageUri: image '%s'" % image, message)
        self.assertIn("its registry %s resolves to 127.0.0.1, a loopback address" % registry,
                      message)
        self.assertIn("list it in containers.insecure_registries", message)
        self.assertIn('insecure_registries: ["%s"]' % registry, message)
        self.assertFalse(self.connected(), "stokerd connected to a refused registry")


if __name__ == "__main__":
    main()
