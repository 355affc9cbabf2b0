"""Jobs whose image is in the node's container engine run in real containers
(docs/containers.md): the image's ENTRYPOINT/CMD, every Vertex variable,
buckets and outputs at their own paths, DDP across containers on the host
network, cancel, kill -9 of stokerd while a container runs, and images that
lack what the job needs. Needs podman (with runc) and the base image of
scripts/container-base-image.sh; without them these tests skip (CI, with
STOKER_TEST_REQUIRE_ALL=1, fails instead)."""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import textwrap
import unittest

from harness import (BASE_IMAGE, DEFAULT_CONFIG, IMAGE, StokerTestCase, podman, podman_flags,
                     podman_setup_error, read_text, skip_or_fail, stokerd_refuses, wait_for)

BASE = BASE_IMAGE
TRAINER = "localhost/stoker-e2e/trainer:%d" % os.getpid()
NO_PYTHON = "localhost/stoker-e2e/no-python:%d" % os.getpid()
ROOT_HOME = "localhost/stoker-e2e/root-home:%d" % os.getpid()

TASK = '''
import json, os, sys
print("args", json.dumps(sys.argv[1:]))
print("in image", os.path.exists("/app/trainer/task.py"))
print("uid", os.getuid())
cluster = json.loads(os.environ["CLUSTER_SPEC"])
print("task", cluster["task"]["type"], cluster["task"]["index"])
print("job id", os.environ["CLOUD_ML_JOB_ID"])
model = os.environ["AIP_MODEL_DIR"]
os.makedirs(model, exist_ok=True)
with open(os.path.join(model, "model.txt"), "w") as f:
    f.write("trained in a container\\n")
print("secret", os.environ.get("SECRET_WITH_NEWLINE", "").replace("\\n", "|"))
'''

DDP = '''
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print("rank", dist.get_rank(), "of", dist.get_world_size(), "sum", t.item(), flush=True)
dist.destroy_process_group()
'''

TUNE = '''
import argparse, hypertune
p = argparse.ArgumentParser()
p.add_argument("--x", type=float, required=True)
a = p.parse_args()
hypertune.HyperTune().report_hyperparameter_tuning_metric("score", a.x, global_step=1)
'''

DOCKERFILE = '''
FROM %s
COPY trainer /app/trainer
WORKDIR /app
ENTRYPOINT ["python3", "-m", "trainer.task"]
CMD ["--from-cmd"]
''' % BASE

NO_PYTHON_DOCKERFILE = '''
FROM %s
RUN rm -f /usr/bin/python3 /usr/bin/python3.11
''' % BASE

# As images written for Vertex are (it runs them as root): the code in
# /root (0700), a package installed with `pip install --user` (root's user
# site), the image's root expected.
ROOT_HOME_DOCKERFILE = '''
FROM %s
COPY trainer /root/trainer
RUN chmod 700 /root && mkdir -p /root/.local/lib/python3.11/site-packages && \\
    echo 'WHERE = "user site"' > /root/.local/lib/python3.11/site-packages/usersite_mod.py
WORKDIR /root
ENTRYPOINT ["python3", "-m", "trainer.roothome"]
''' % BASE

ROOT_HOME_TASK = '''
import os, usersite_mod
print("uid", os.getuid(), "home", os.environ["HOME"], "from", usersite_mod.WHERE)
print("uid_map", " ".join(open("/proc/self/uid_map").read().split()))
os.makedirs(os.environ["AIP_MODEL_DIR"], exist_ok=True)
open(os.path.join(os.environ["AIP_MODEL_DIR"], "m.txt"), "w").write("root in the image")
open("/root/written-by-root", "w").write("x")
'''


SETUP_ERROR = None


def setUpModule():
    global SETUP_ERROR
    SETUP_ERROR = podman_setup_error()
    if SETUP_ERROR:
        return
    ctx = tempfile.mkdtemp(prefix="stoker-image-")
    try:
        os.makedirs(os.path.join(ctx, "trainer"))
        for name, text in (("__init__.py", ""), ("task.py", TASK), ("ddp.py", DDP), ("tune.py", TUNE),
                           ("roothome.py", ROOT_HOME_TASK)):
            with open(os.path.join(ctx, "trainer", name), "w") as f:
                f.write(textwrap.dedent(text))
        with open(os.path.join(ctx, "Dockerfile"), "w") as f:
            f.write(DOCKERFILE)
        with open(os.path.join(ctx, "NoPython"), "w") as f:
            f.write(NO_PYTHON_DOCKERFILE)
        with open(os.path.join(ctx, "RootHome"), "w") as f:
            f.write(ROOT_HOME_DOCKERFILE)
        for tag, dockerfile in ((TRAINER, "Dockerfile"), (NO_PYTHON, "NoPython"),
                                (ROOT_HOME, "RootHome")):
            r = podman("build", *podman_flags(), "-t", tag, "-f", os.path.join(ctx, dockerfile),
                       ctx, check=False)
            if r.returncode != 0:
                SETUP_ERROR = "podman build of %s failed: %s" % (tag, r.stderr[-2000:])
                return
    finally:
        shutil.rmtree(ctx, ignore_errors=True)


def tearDownModule():
    if shutil.which("podman"):
        podman("rmi", "--force", TRAINER, NO_PYTHON, ROOT_HOME, check=False)


def pool(image, replicas=1, command=None, args=None, env=None, machine="e2-standard-2"):
    spec = {"imageUri": image}
    if command is not None:
        spec["command"] = command
    if args is not None:
        spec["args"] = args
    if env:
        spec["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {"machineSpec": {"machineType": machine}, "replicaCount": replicas,
            "containerSpec": spec}


def job(name, *pools):
    return {"displayName": name, "jobSpec": {"workerPoolSpecs": list(pools),
                                             "scheduling": {"maxRetries": 0}}}


class ContainerJobTest(StokerTestCase):

    config = DEFAULT_CONFIG + "telemetry_seconds: 0.5\n"

    def setUp(self):
        if SETUP_ERROR:
            skip_or_fail(self, SETUP_ERROR)
        super().setUp()

    def logs(self, job_id):
        return self.stoker("jobs", "logs", job_id).stdout

    def events(self, job_id):
        return [e["reason"] for e in
                self.api("GET", self.project_path + "/" + job_id + "/events")[1]["events"]]

    def test_the_images_entrypoint_and_cmd_run_with_the_vertex_environment(self):
        # No command and no args: the image's ENTRYPOINT and CMD, in the image.
        plain = self.submit(job("plain", pool(TRAINER, env={"SECRET_WITH_NEWLINE": "a\nb"})))
        # args replace CMD (Docker's and Vertex's rule), ENTRYPOINT stays.
        with_args = self.submit(job("args", pool(TRAINER, args=["--epochs", "$(CLOUD_ML_JOB_ID)"])))
        for j in (plain, with_args):
            self.assertEqual(self.wait_state(j, timeout=120)["state"], "JOB_STATE_SUCCEEDED",
                             self.logs(j))
        out = self.logs(plain)
        self.assertIn('args ["--from-cmd"]', out)
        self.assertIn("in image True", out)
        self.assertIn("task workerpool0 0", out)
        self.assertIn("job id " + plain, out)
        self.assertIn("secret a|b", out)  # a value with a newline arrives whole
        self.assertIn('args ["--epochs", "%s"]' % with_args, self.logs(with_args))
        # AIP_MODEL_DIR is a bucket path on the host, mounted at the same place.
        model = os.path.join(self.data, "buckets", "stoker-outputs", plain, "model", "model.txt")
        wait_for(lambda: os.path.exists(model), 10, "the model file on the host")
        self.assertEqual(read_text(model), "trained in a container\n")
        self.assertTrue(any("runs in a container: image " + TRAINER in e
                            for e in self.events(plain)), self.events(plain))
        self.assertEqual(self.containers_of(plain), [])  # removed at the end
        # And its cgroups, in every hierarchy (podman makes its own in all).
        wait_for(lambda: self.cgroups_of(plain) == [], 10,
                 "the replica's cgroups to be removed: %s" % self.cgroups_of(plain))
        # The job's variables went to the container through a file only the
        # supervisor may read, never onto the engine's command line.
        env_file = os.path.join(self.replica_dir(plain), "container.env")
        self.assertEqual(os.stat(env_file).st_mode & 0o777, 0o600)

    def test_the_gcloud_command_line_runs_an_image_as_built(self):
        r = self.stoker("ai", "custom-jobs", "create", "--display-name=cli",
                        "--worker-pool-spec=machine-type=n1-standard-4,replica-count=1,"
                        "container-image-uri=" + TRAINER)
        j = [w for w in r.stdout.split() + r.stderr.split() if "customJobs/" in w][0]
        j = j.rstrip(".]").rsplit("/", 1)[1]
        self.assertEqual(self.wait_state(j, timeout=120)["state"], "JOB_STATE_SUCCEEDED")
        self.assertIn('args ["--from-cmd"]', self.logs(j))

    def test_the_buckets_are_at_gcs_in_a_container(self):
        src = os.path.join(self.tmp, "in.txt")
        with open(src, "w") as f:
            f.write("from-the-bucket\n")
        self.stoker("storage", "cp", src, "gs://cdata/in.txt")
        script = "cat /gcs/cdata/in.txt && echo from-the-container > /gcs/cdata/out.txt && ls /gcs"
        j = self.submit(job("gcs", pool(TRAINER, command=["sh", "-c", script])))
        self.assertEqual(self.wait_state(j, timeout=120)["state"], "JOB_STATE_SUCCEEDED",
                         self.logs(j))
        self.assertIn("from-the-bucket", self.logs(j))
        self.assertIn("cdata", self.logs(j))
        self.assertEqual(read_text(os.path.join(self.data, "buckets", "cdata", "out.txt")),
                         "from-the-container\n")

    def test_builds_submit_runs_a_cloud_build_configs_docker_steps(self):
        # A Cloud Build file as a Vertex fine-tuning repository has it, then a
        # job on the image it built.
        ctx = os.path.join(self.tmp, "repo")
        os.makedirs(os.path.join(ctx, "docker"))
        with open(os.path.join(ctx, "docker", "Dockerfile"), "w") as f:
            f.write("FROM %s\nARG GREETING\nRUN echo \"$GREETING\" > /greeting\n"
                    "ENTRYPOINT [\"cat\", \"/greeting\"]\n" % BASE)
        image = "us-central1-docker.pkg.dev/p/repo/built:%d" % os.getpid()
        with open(os.path.join(ctx, "cloudbuild.yaml"), "w") as f:
            f.write(textwrap.dedent("""\
                steps:
                - name: gcr.io/cloud-builders/docker
                  args: [build, --network=cloudbuild, -t, 'us-central1-docker.pkg.dev/$PROJECT_ID/repo/built:${_TAG}',
                         --build-arg, 'GREETING=hello from cloud build', -f, docker/Dockerfile, .]
                - name: gcr.io/cloud-builders/docker
                  args: [push, 'us-central1-docker.pkg.dev/$PROJECT_ID/repo/built:${_TAG}']
                images: ['us-central1-docker.pkg.dev/$PROJECT_ID/repo/built:${_TAG}']
                """))
        try:
            r = self.stoker("builds", "submit", "--config", "cloudbuild.yaml", ".",
                            "--substitutions=_TAG=%d" % os.getpid(), cwd=ctx, timeout=600)
            self.assertIn("kept in this machine's image store", r.stdout)
            self.assertIn("DONE: 1 image build(s) on this machine; images: " + image, r.stdout)
            self.assertIn("--network cloudbuild ignored", r.stderr)
            j = self.submit(job("built", pool(image)))
            self.assertEqual(self.wait_state(j, timeout=120)["state"], "JOB_STATE_SUCCEEDED",
                             self.logs(j))
            self.assertIn("hello from cloud build", self.logs(j))
            # Steps it cannot run are refused before anything is built.
            with open(os.path.join(ctx, "other.yaml"), "w") as f:
                f.write("steps:\n- name: gcr.io/cloud-builders/gcloud\n  args: [version]\n")
            r = self.stoker("builds", "submit", "--config", "other.yaml", ".", cwd=ctx,
                            check=False)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("steps[0] (step 1): gcr.io/cloud-builders/gcloud", r.stderr)
        finally:
            podman("rmi", "--force", image, check=False)

    def test_local_run_runs_the_package_in_the_image(self):
        pkg = os.path.join(self.tmp, "pkg")
        os.makedirs(pkg)
        with open(os.path.join(pkg, "t.py"), "w") as f:
            f.write("import os, sys\nprint('in image', os.path.exists('/app/trainer/task.py'),"
                    " 'args', sys.argv[1:], 'gpus', repr(os.environ['CUDA_VISIBLE_DEVICES']))\n"
                    "open('out.txt', 'w').write('ok')\n")
        r = self.stoker("ai", "custom-jobs", "local-run", "--executor-image-uri=" + TRAINER,
                        "--local-package-path=" + pkg, "--script=t.py", "--", "a", "b")
        self.assertIn("in image True args ['a', 'b'] gpus ''", r.stdout)
        self.assertIn("in a container of " + TRAINER, r.stderr)
        self.assertEqual(read_text(os.path.join(pkg, "out.txt")), "ok")

    def test_local_run_with_only_an_image_runs_its_entrypoint_with_the_arguments(self):
        # `docker run IMAGE ARGS`: the image's ENTRYPOINT in its WORKDIR, the
        # arguments in place of its CMD (the trainer then wants the cluster
        # environment a job would give it, which local-run does not make).
        pkg = os.path.join(self.tmp, "pkg")
        os.makedirs(pkg)
        r = self.stoker("ai", "custom-jobs", "local-run", "--executor-image-uri=" + TRAINER,
                        "--local-package-path=" + pkg, "--", "--job-dir", ".", check=False)
        self.assertIn('args ["--job-dir", "."]', r.stdout, r.stderr)
        self.assertIn("in image True", r.stdout)
        self.assertIn("local-run: the ENTRYPOINT of " + TRAINER, r.stderr)
        # An image that runs with a local interpreter has no ENTRYPOINT here.
        r = self.stoker("ai", "custom-jobs", "local-run", "--executor-image-uri=" + IMAGE,
                        "--local-package-path=" + pkg, "--", "x", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("runs with a local interpreter here", r.stderr)
        self.assertIn("stoker images build -t " + IMAGE, r.stderr)

    def test_chief_and_two_workers_train_with_ddp_across_containers(self):
        ddp = ["python3", "-m", "trainer.ddp"]
        j = self.submit(job("ddp", pool(TRAINER, command=ddp),
                            pool(TRAINER, replicas=2, command=ddp)))
        self.assertEqual(self.wait_state(j, timeout=240)["state"], "JOB_STATE_SUCCEEDED",
                         self.logs(j))
        out = self.logs(j)
        for rank in range(3):
            self.assertIn("rank %d of 3 sum 6.0" % rank, out)

    def test_cancel_stops_the_container_and_leaves_none(self):
        j = self.submit(job("long", pool(TRAINER, command=["sleep", "600"])))
        wait_for(lambda: self.containers_of(j), 60, "the container to run")
        self.stoker("jobs", "cancel", j)
        self.assertEqual(self.wait_state(j, timeout=60)["state"], "JOB_STATE_CANCELLED")
        self.assertEqual(self.containers_of(j), [])
        wait_for(lambda: self.cgroups_of(j) == [], 10,
                 "the replica's cgroups to be removed: %s" % self.cgroups_of(j))

    def test_a_container_job_survives_kill_9_of_stokerd_and_ends_once(self):
        gate = os.path.join(self.data, "buckets", "gate", "open")
        os.makedirs(os.path.dirname(gate))
        script = "while [ ! -e %s ]; do sleep 0.1; done; echo passed the gate" % gate
        j = self.submit(job("gated", pool(TRAINER, command=["sh", "-c", script])))
        wait_for(lambda: self.containers_of(j), 60, "the container to run")
        self.daemon.kill(signal.SIGKILL)
        self.daemon.start()
        open(gate, "w").close()
        self.assertEqual(self.wait_state(j, timeout=60)["state"], "JOB_STATE_SUCCEEDED")
        self.assertEqual(self.logs(j).count("passed the gate"), 1)
        self.assertEqual(self.containers_of(j), [])
        # One attempt: re-adopted, not started again.
        self.assertEqual(sorted(os.listdir(os.path.join(self.data, "jobs", j))), ["workerpool0-0"])

    def test_an_image_that_lacks_what_the_job_needs_fails_with_the_engines_words(self):
        # No Python in the image: the engine cannot start the command.
        j = self.submit(job("nopy", pool(NO_PYTHON, command=["python3", "-c", "pass"])))
        done = self.wait_state(j, timeout=60)
        self.assertEqual(done["state"], "JOB_STATE_FAILED")
        out = self.logs(j)
        self.assertRegex(out, "python3.*(not found|no such file)")
        self.assertEqual(self.containers_of(j), [])
        # A module the image does not have: the trainer's own error.
        j = self.submit(job("nomod", pool(TRAINER, command=["python3", "-m", "no_such_module"])))
        self.assertEqual(self.wait_state(j, timeout=60)["state"], "JOB_STATE_FAILED")
        self.assertIn("No module named no_such_module", self.logs(j))

    def test_telemetry_samples_the_containers_processes(self):
        burn = "import time\nt = time.time()\nwhile time.time() - t < 5: pass\n"
        j = self.submit(job("burn", pool(TRAINER, command=["python3", "-c", burn])))
        done = self.wait_state(j, timeout=60)
        self.assertEqual(done["state"], "JOB_STATE_SUCCEEDED", (done, self.logs(j)))
        status, body = self.api("GET", self.project_path + "/" + j + "/telemetry")
        self.assertEqual(status, 200, body)
        points = body["replicas"][0]["points"]
        # A busy loop: near 100 % of a core on a quiet machine, 35-50 % seen
        # when builds share the 2 cores; a sleeping process is near 0.
        self.assertGreaterEqual(len([p for p in points if p["cpuPercent"] > 20]), 2, points)

    def test_a_timeout_stops_the_container(self):
        spec = job("slow", pool(TRAINER, command=["sleep", "600"]))
        spec["jobSpec"]["scheduling"]["timeout"] = "2s"
        j = self.submit(spec)
        done = self.wait_state(j, timeout=60)
        self.assertEqual(done["state"], "JOB_STATE_FAILED")
        self.assertIn("timed out after 2s", json.dumps(done))
        self.assertEqual(self.containers_of(j), [])

    def test_trials_report_hypertune_metrics_from_containers(self):
        studies = "/v1/projects/p/locations/l/hyperparameterTuningJobs"
        status, reply = self.api("POST", studies, {
            "displayName": "tune", "maxTrialCount": 2, "parallelTrialCount": 2,
            "studySpec": {"metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
                          "parameters": [{"parameterId": "x", "doubleValueSpec": {
                              "minValue": 0.0, "maxValue": 1.0}}],
                          "algorithm": "RANDOM_SEARCH"},
            "trialJobSpec": {"workerPoolSpecs": [
                pool(TRAINER, command=["python3", "-m", "trainer.tune"])]}})
        self.assertEqual(status, 200, reply)
        sid = reply["name"].rsplit("/", 1)[1]
        study = wait_for(lambda: (lambda s: s if s["state"] == "JOB_STATE_SUCCEEDED" or
                                  s["state"] == "JOB_STATE_FAILED" else None)(
            self.api("GET", studies + "/" + sid)[1]), 180, "the study to end")
        self.assertEqual(study["state"], "JOB_STATE_SUCCEEDED", study)
        for t in study["trials"]:
            x = t["parameters"][0]["value"]
            self.assertAlmostEqual(t["finalMeasurement"]["metrics"][0]["value"], x, places=9)

    def test_an_image_the_engine_lacks_is_refused_at_submit_with_the_fix(self):
        status, body = self.api("POST", self.project_path,
                                job("missing", pool("gcr.io/nowhere/trainer:v9")))
        self.assertEqual(status, 400, body)
        message = body["error"]["message"]
        self.assertIn("workerPoolSpecs[0].containerSpec.imageUri", message)
        self.assertIn("not in podman's image store", message)
        self.assertIn("stoker images build -t gcr.io/nowhere/trainer:v9", message)


class ContainerGpuWithoutCdiTest(StokerTestCase):
    """A GPU container job on a machine whose podman cannot pass GPUs (no
    CDI spec): a launch failure that every attempt would meet again."""

    config = DEFAULT_CONFIG + """
inventory:
  cpus: 4
  memory_gb: 16
  gpus: [{type: NVIDIA_TESLA_T4}]
"""

    def setUp(self):
        if SETUP_ERROR:
            skip_or_fail(self, SETUP_ERROR)
        for d in ("/etc/cdi", "/var/run/cdi"):
            if os.path.isdir(d) and any("nvidia" in f for f in os.listdir(d)):
                self.skipTest("this machine has a CDI spec for NVIDIA GPUs in " + d)
        super().setUp()

    def test_a_permanent_launch_failure_fails_the_job_without_retries(self):
        spec = pool(TRAINER, command=["python3", "-c", "pass"])
        spec["machineSpec"].update({"acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 1})
        j = job("gpu", spec)
        j["jobSpec"]["scheduling"]["maxRetries"] = 2  # even retries the user allows
        job_id = self.submit(j)
        done = self.wait_state(job_id, timeout=60)
        self.assertEqual(done["state"], "JOB_STATE_FAILED")
        self.assertIn("no CDI spec for NVIDIA GPUs", done["error"]["message"])
        self.assertIn("nvidia-ctk cdi generate", done["error"]["message"])
        events = self.api("GET", self.project_path + "/" + job_id + "/events")[1]["events"]
        restarts = [e for e in events if "Restarting" in e.get("message", "")]
        self.assertEqual(restarts, [], events)
        status = json.loads(read_text(os.path.join(self.replica_dir(job_id), "status.json")))
        self.assertEqual((status["state"], status.get("permanent")), ("launch_failed", True))


NOBODY_CONFIG = DEFAULT_CONFIG.replace("default_unix_user: root\nallow_root_trainers: true\n",
                                      "default_unix_user: nobody\n")

# What the trainer shows of itself: its uid inside, how the namespace maps it,
# its capabilities, where it may write.
WHO_AM_I = ("echo uid $(id -u); echo uid_map $(cat /proc/self/uid_map); "
            "grep CapEff /proc/self/status; "
            "mkdir -p $AIP_MODEL_DIR && echo m > $AIP_MODEL_DIR/m.txt && echo wrote-output; "
            "mkdir %(data)s/buckets/stoker-outputs/by-group && echo wrote-bucket-by-group; "
            "touch %(data)s/jobs/x %(data)s/buckets/x 2>/dev/null; "
            "ls /root >/dev/null 2>&1 && echo root-home-readable || echo no-root-home")


class ContainerAccountTest(StokerTestCase):
    """A root daemon's trainers run as their account in the container too:
    the image's root is that account on the host (a user namespace mapping
    one id, docs/containers.md "Accounts"), without capabilities, writing
    only where a local trainer may."""

    config = NOBODY_CONFIG

    def setUp(self):
        if SETUP_ERROR:
            skip_or_fail(self, SETUP_ERROR)
        if os.getuid() != 0:
            self.skipTest("needs a root daemon")
        StokerTestCase.setUp(self)

    def assert_host_root_dirs_untouched(self):
        # The job directory is not mounted (only the replica's work/ and
        # hypertune/, so its parents are the container's own); the buckets'
        # root belongs to host root.
        for d in ("jobs", "buckets"):
            self.assertFalse(os.path.exists(os.path.join(self.data, d, "x")), d)

    def model_file_owner(self, j):
        model = os.path.join(self.data, "buckets", "stoker-outputs", j, "model", "m.txt")
        return os.stat(model).st_uid

    def test_the_images_root_is_nobody_on_the_host_and_cannot_write_the_job_directory(self):
        who = WHO_AM_I % {"data": self.data}
        j = self.submit(job("nobody", pool(TRAINER, command=["sh", "-c", who])))
        self.assertEqual(self.wait_state(j, timeout=60)["state"], "JOB_STATE_SUCCEEDED")
        out = self.stoker("jobs", "logs", j).stdout
        self.assertIn("uid 0\n", out)
        self.assertIn("uid_map 0 65534 1\n", out)  # root inside is nobody outside, alone
        self.assertIn("CapEff:\t0000000000000000", out)
        self.assertIn("wrote-output", out)
        # The bucket group is not carried into the namespace (one id each).
        self.assertNotIn("wrote-bucket-by-group", out)
        self.assert_host_root_dirs_untouched()
        self.assertIn("root-home-readable", out)
        self.assertEqual(self.model_file_owner(j), 65534)  # outputs as a local trainer's
        events = json.dumps(self.api("GET", self.project_path + "/" + j + "/events")[1])
        self.assertIn("the image's root is nobody (uid 65534) on this host", events)

    def test_an_image_written_for_vertex_runs_from_root_with_its_user_site(self):
        j = self.submit(job("roothome", pool(ROOT_HOME)))
        done = self.wait_state(j, timeout=60)
        out = self.stoker("jobs", "logs", j).stdout
        self.assertEqual(done["state"], "JOB_STATE_SUCCEEDED", (done, out))
        self.assertIn("uid 0 home /root from user site", out)
        self.assertIn("uid_map 0 65534 1", out)
        self.assertEqual(self.model_file_owner(j), 65534)


class ContainerAccountWithoutNamespaceTest(StokerTestCase):
    """containers.user_namespace: false runs the image as the account's own
    uid with its groups (the image's /root is then closed to it)."""

    config = NOBODY_CONFIG + "containers: {user_namespace: false}\n"

    setUp = ContainerAccountTest.setUp

    def test_the_trainer_runs_as_nobody_with_the_hosts_ids(self):
        who = WHO_AM_I % {"data": self.data}
        j = self.submit(job("nobody", pool(TRAINER, command=["sh", "-c", who])))
        self.assertEqual(self.wait_state(j, timeout=60)["state"], "JOB_STATE_SUCCEEDED")
        out = self.stoker("jobs", "logs", j).stdout
        self.assertIn("uid 65534\n", out)
        self.assertIn("CapEff:\t0000000000000000", out)
        self.assertIn("wrote-bucket-by-group", out)  # the bucket group, as a local trainer
        ContainerAccountTest.assert_host_root_dirs_untouched(self)
        self.assertIn("no-root-home", out)

    def test_an_image_written_for_vertex_cannot_read_its_own_root(self):
        # What user_namespace: true is for.
        j = self.submit(job("roothome", pool(ROOT_HOME)))
        self.assertEqual(self.wait_state(j, timeout=60)["state"], "JOB_STATE_FAILED")
        self.assertRegex(self.stoker("jobs", "logs", j).stdout,
                         "No module named 'trainer'")

    def test_a_value_that_is_not_a_boolean_is_refused_naming_the_key(self):
        err = stokerd_refuses(os.path.join(self.tmp, "d"),
                              DEFAULT_CONFIG + "containers: {user_namespace: maybe}\n")
        self.assertIn("containers.user_namespace: must be true", err)


class EngineConfigTest(StokerTestCase):
    """containers.engine: a named engine that cannot be used stops the
    daemon with its words; none turns containers off."""

    config = DEFAULT_CONFIG + "containers: {engine: none}\n"

    def test_an_unusable_engine_named_in_the_config_is_refused_with_its_words(self):
        # This machine's docker is a client without an engine (or absent).
        err = stokerd_refuses(os.path.join(self.tmp, "d"),
                              DEFAULT_CONFIG + "containers: {engine: docker}\n")
        self.assertIn("containers.engine: docker cannot be used", err)
        self.assertIn("set containers.engine to auto or none", err)
        err = stokerd_refuses(os.path.join(self.tmp, "e"),
                              DEFAULT_CONFIG + "containers: {engine: lxc}\n")
        self.assertIn("containers.engine", err)
        self.assertIn("auto, podman, docker, none", err)

    def test_engine_none_runs_nothing_in_containers_and_says_so(self):
        status, body = self.api("POST", self.project_path,
                                job("img", pool(TRAINER, command=["true"])))
        self.assertEqual(status, 400, body)
        message = body["error"]["message"]
        self.assertIn("no container engine (containers.engine is none)", message)
        self.assertIn("images:", message)


class PrebuiltImageTest(StokerTestCase):
    """The fast path: Vertex's prebuilt images map to local interpreters,
    but only to one that can import the image's framework."""

    def test_a_tensorflow_image_without_tensorflow_is_refused_at_submit(self):
        r = subprocess.run(["/usr/bin/python3", "-c", "import tensorflow"], capture_output=True)
        if r.returncode == 0:
            self.skipTest("this machine's Python has tensorflow")
        image = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-12.py310:latest"
        spec = {"executorImageUri": image, "packageUris": ["gs://b/t.tar.gz"],
                "pythonModule": "trainer.task"}
        status, body = self.api("POST", self.project_path, {
            "displayName": "tf", "jobSpec": {"workerPoolSpecs": [{
                "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
                "pythonPackageSpec": spec}]}})
        self.assertEqual(status, 400, body)
        message = body["error"]["message"]
        self.assertIn("pythonPackageSpec.executorImageUri", message)
        self.assertIn("needs Python module 'tensorflow'", message)
        self.assertIn("images:", message)

    def test_an_image_name_that_would_be_an_engine_option_is_refused(self):
        status, body = self.api("POST", self.project_path,
                                job("opt", pool("--privileged", command=["true"])))
        self.assertEqual(status, 400, body)
        self.assertIn("'--privileged' is not an image reference", body["error"]["message"])

    def test_a_pytorch_image_runs_with_the_interpreter_and_says_why(self):
        image = "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-1.py310:latest"
        j = self.submit({"displayName": "pt", "jobSpec": {"workerPoolSpecs": [{
            "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
            "containerSpec": {"imageUri": image,
                              "command": ["python3", "-c", "import torch; print('ok')"]}}]}})
        self.assertEqual(self.wait_state(j, timeout=120)["state"], "JOB_STATE_SUCCEEDED")
        events = [e["reason"] for e in
                  self.api("GET", self.project_path + "/" + j + "/events")[1]["events"]]
        self.assertTrue(any("runs with the interpreter" in e and "pytorch-*" in e
                            for e in events), events)


if __name__ == "__main__":
    unittest.main()
