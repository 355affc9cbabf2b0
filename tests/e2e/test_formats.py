"""The other ways in: gcloud's flags (`stoker ai custom-jobs create`), the AI
Platform form (`stoker jobs submit training`) and the legacy REST API."""
import json
import os
import re
import subprocess
import tarfile

from harness import IMAGE, StokerTestCase, wait_for

# Prints what it got; the primary replica waits until every replica has
# printed (the job ends when the primary does).
TRAINER = """
import json, os, sys, time
cluster = json.loads(os.environ["CLUSTER_SPEC"])
task = cluster["task"]
print("trainer args:", json.dumps(sys.argv[1:]), flush=True)
print("model dir:", os.environ.get("AIP_MODEL_DIR"), flush=True)
print("task:", task["type"], "rank", os.environ.get("RANK"), flush=True)
marks = os.path.join(os.environ["AIP_MODEL_DIR"], "..", "started")
os.makedirs(marks, exist_ok=True)
open(os.path.join(marks, "%s-%d" % (task["type"], task["index"])), "w").close()
if task["type"] == "workerpool0":
    want = sum(len(hosts) for hosts in cluster["cluster"].values())
    deadline = time.time() + 30
    while len(os.listdir(marks)) < want and time.time() < deadline:
        time.sleep(0.05)
"""

# The same for a container command (no commas: it goes through --command).
WAIT_FOR_ALL = ("echo rank=$RANK; m=$AIP_MODEL_DIR/../started; mkdir -p $m; touch $m/$RANK; "
                "if [ $RANK = 0 ]; then for i in $(seq 300); do "
                "[ $(ls $m | wc -l) -ge $WORLD_SIZE ] && break; sleep 0.1; done; fi")


class FormatsTest(StokerTestCase):
    config = StokerTestCase.config + """
inventory:
  cpus: 16
  memory_gb: 128
"""

    def package(self, name="proj", layout=None):
        """Writes a directory of files under the test's temp dir; returns its path."""
        root = os.path.join(self.tmp, name)
        for rel, text in (layout or {}).items():
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        return root

    def extra_archive(self, path):
        """A source archive extra-1.0.tar.gz holding the module extra_mod."""
        os.makedirs(os.path.dirname(path), exist_ok=True)
        src = self.package("extra-src", {"extra-1.0/extra_mod.py": "VALUE = 'extra ok'\n"})
        with tarfile.open(path, "w:gz") as tar:
            tar.add(os.path.join(src, "extra-1.0"), arcname="extra-1.0")
        return path

    def job_count(self):
        status, body = self.api("GET", self.project_path)
        self.assertEqual(status, 200, body)
        return len(body["customJobs"])

    def created_id(self, out):
        m = re.search(r"CustomJob \[projects/p/locations/l/customJobs/(\d+)\] is submitted successfully\.",
                      out)
        self.assertTrue(m, out)
        return m.group(1)

    # ---- gcloud ai custom-jobs create ----------------------------------------

    def test_gcloud_worker_pool_specs_run_every_replica(self):
        r = self.stoker(
            "ai", "custom-jobs", "create", "--display-name=two-pools",
            "--worker-pool-spec=machine-type=e2-standard-2,container-image-uri=" + IMAGE,
            "--worker-pool-spec=",  # an empty pool 1 keeps pool 2 in its place
            "--worker-pool-spec=machine-type=e2-standard-2,replica-count=2,container-image-uri=" + IMAGE,
            "--command=/bin/sh,-c," + WAIT_FOR_ALL, "--labels=team=ml,stage=test", "--follow")
        job_id = self.created_id(r.stdout)
        ranks = sorted(re.findall(r"(workerpool\d-\d): rank=(\d)", r.stdout))
        self.assertEqual([x[0] for x in ranks], ["workerpool0-0", "workerpool2-0", "workerpool2-1"],
                         r.stdout)
        self.assertEqual(sorted(x[1] for x in ranks), ["0", "1", "2"], r.stdout)
        self.assertIn("JOB_STATE_SUCCEEDED", r.stdout)
        j = self.job(job_id)
        self.assertEqual(j["displayName"], "two-pools")
        self.assertEqual(j["labels"], {"team": "ml", "stage": "test"})
        pools = j["jobSpec"]["workerPoolSpecs"]
        self.assertEqual(pools[1], {})
        self.assertEqual([pools[0]["replicaCount"], pools[2]["replicaCount"]], ["1", "2"])
        # describe, list, stream-logs and cancel take gcloud's forms, the full name included.
        name = "projects/p/locations/l/customJobs/" + job_id
        d = json.loads(self.stoker("--format", "json", "ai", "custom-jobs", "describe", name).stdout)
        self.assertEqual(d["name"], name)
        self.assertIn("two-pools", self.stoker("ai", "custom-jobs", "list").stdout)
        logs = self.stoker("ai", "custom-jobs", "stream-logs", job_id, "--task-name", "workerpool2-1",
                           "--polling-interval", "1").stdout
        self.assertRegex(logs.strip(), r"^rank=[12]$")
        r = self.stoker("ai", "custom-jobs", "cancel", name, check=False)
        self.assertEqual(r.returncode, 2, r.stderr)  # it already ended

    def test_gcloud_config_is_the_base_and_flags_replace_pools_and_args(self):
        config = self.write("spec.yaml", """
workerPoolSpecs:
- machineSpec: {machineType: n1-standard-4}
  replicaCount: 1
  containerSpec:
    imageUri: %s
    command: [/bin/sh, -c, 'echo from-config "$@"', sh]
    args: [one, two]
scheduling: {timeout: 600s}
""" % IMAGE)
        r = self.stoker("ai", "custom-jobs", "create", "--display-name=cfg", "--config", config,
                        "--args=three,four", "--follow")
        self.assertIn("from-config three four", r.stdout)
        job_id = self.created_id(r.stdout)
        spec = self.job(job_id)["jobSpec"]
        self.assertEqual(spec["scheduling"]["timeout"], "600s")
        self.assertEqual(spec["workerPoolSpecs"][0]["containerSpec"]["args"], ["three", "four"])

        r = self.stoker("ai", "custom-jobs", "create", "--display-name=replaced", "--config", config,
                        "--worker-pool-spec=machine-type=e2-standard-2,container-image-uri=" + IMAGE,
                        "--worker-pool-spec=machine-type=e2-standard-2,container-image-uri=" + IMAGE,
                        # The job ends, and stops its worker, when the chief exits: the
                        # chief waits for the worker's mark so that both have printed.
                        "--command=/bin/sh,-c,echo replaced; touch %s/rank-$RANK; "
                        "while [ ! -e %s/rank-1 ]; do sleep 0.05; done" % (self.tmp, self.tmp),
                        "--follow")
        self.assertEqual(r.stdout.count("replaced"), 2, r.stdout)
        spec = self.job(self.created_id(r.stdout))["jobSpec"]
        self.assertEqual([p["machineSpec"]["machineType"] for p in spec["workerPoolSpecs"]],
                         ["e2-standard-2", "e2-standard-2"])
        self.assertNotIn("args", spec["workerPoolSpecs"][0]["containerSpec"])
        self.assertEqual(spec["scheduling"]["timeout"], "600s")

    def test_gcloud_local_package_with_python_module(self):
        root = self.package("proj", {
            "trainer/__init__.py": "",
            "trainer/util.py": "def greet():\n    return open('data/hello.txt').read().strip()\n",
            "trainer/task.py": ("from trainer import util\nimport extra_mod\n"
                                "print('greeting:', util.greet(), extra_mod.VALUE, flush=True)\n" +
                                TRAINER),
            "data/hello.txt": "hello from data\n",
        })
        self.extra_archive(os.path.join(root, "dist", "extra-1.0.tar.gz"))
        r = self.stoker(
            "ai", "custom-jobs", "create", "--display-name=local-module",
            "--worker-pool-spec=machine-type=e2-standard-2,executor-image-uri=%s,local-package-path=%s,"
            "python-module=trainer.task,extra-dirs=data,requirements=numpy,"
            "extra-packages=dist/extra-1.0.tar.gz" % (IMAGE, root),
            "--worker-pool-spec=machine-type=e2-standard-2,replica-count=1",
            "--args=--epochs=3,--lr=0.1", "--follow")
        self.assertIn("JOB_STATE_SUCCEEDED", r.stdout)
        # numpy is the interpreter's own: the environment installs nothing more.
        self.assertIn("Requirements [numpy] go with the package", r.stderr)
        self.assertIn("workerpool0-0: stoker-run: requirements [numpy]: environment", r.stdout)
        self.assertIn('workerpool0-0: trainer args: ["--epochs=3", "--lr=0.1"]', r.stdout)
        self.assertIn('workerpool1-0: trainer args: ["--epochs=3", "--lr=0.1"]', r.stdout)
        self.assertIn("workerpool1-0: greeting: hello from data extra ok", r.stdout)
        pools = self.job(self.created_id(r.stdout))["jobSpec"]["workerPoolSpecs"]
        for pool in pools:
            pkg = pool["pythonPackageSpec"]
            self.assertEqual(pkg["executorImageUri"], IMAGE)
            self.assertEqual(len(pkg["packageUris"]), 2)
            self.assertTrue(pkg["packageUris"][0].startswith("gs://"), pkg)

    def test_gcloud_local_package_with_scripts(self):
        root = self.package("scripts", {
            "bin/train.py": "import sys\nprint('py script', __name__, sys.argv[1:], flush=True)\n",
            "run.sh": "echo sh script \"$@\" in $(basename $(pwd))\n",
        })
        for script, want in (("bin/train.py", "py script __main__ ['a', 'b']"),
                             ("run.sh", "sh script a b in scripts")):
            r = self.stoker(
                "ai", "custom-jobs", "create", "--display-name=script",
                "--worker-pool-spec=machine-type=e2-standard-2,executor-image-uri=%s,"
                "local-package-path=%s,script=%s" % (IMAGE, root, script),
                "--args=a,b", "--follow")
            self.assertIn(want, r.stdout)
            self.assertIn("JOB_STATE_SUCCEEDED", r.stdout)

    def test_gcloud_bad_worker_pool_specs_exit_2_and_store_nothing(self):
        cases = [
            ("machine-type=e2-standard-2,container-image-uri=%s,python-module=x" % IMAGE,
             "'python-module' cannot be used with 'container-image-uri'"),
            ("machine-type=e2-standard-2,container-image-uri=%s,colour=red" % IMAGE,
             "unknown key 'colour'"),
            ("machine-type=e2-standard-2,container-image-uri=%s,accelerator-count=1" % IMAGE,
             "'accelerator-count' needs 'accelerator-type'"),
        ]
        for value, want in cases:
            r = self.stoker("ai", "custom-jobs", "create", "--display-name=bad",
                            "--worker-pool-spec=" + value, "--command=true", check=False)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("--worker-pool-spec[0]", r.stderr)
            self.assertIn(want, r.stderr)
        r = self.stoker("ai", "custom-jobs", "create", "--display-name=bad",
                        "--worker-pool-spec=machine-type=e2-standard-2,executor-image-uri=%s,"
                        "local-package-path=%s,script=absent.py" % (IMAGE, self.tmp), check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("script 'absent.py'", r.stderr)
        self.assertEqual(self.job_count(), 0)
        status, body = self.api("GET", "/storage/v1/b/stoker-staging/o")
        self.assertTrue(status == 404 or not body.get("items"), body)

    # ---- gcloud ai-platform jobs submit training --------------------------------

    def test_a_trainer_importing_a_framework_this_machine_lacks_is_refused_at_submit(self):
        # Both forms the same way: the AI Platform form once ran such a
        # trainer and failed it with "No module named 'tensorflow'".
        if subprocess.run(["/usr/bin/python3", "-c", "import tensorflow"],
                          capture_output=True).returncode == 0:
            self.skipTest("this machine's Python has tensorflow")
        root = self.package("tfjob", {
            "trainer/__init__.py": "",
            "trainer/task.py": "import os\ntry:\n    import xgboost\nexcept ImportError:\n"
                               "    xgboost = None\nimport tensorflow as tf\nprint(tf.__version__)\n"})
        r = self.stoker("jobs", "submit", "training", "tf_job",
                        "--package-path", os.path.join(root, "trainer"),
                        "--module-name", "trainer.task", "--region", "us-central1", check=False)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertRegex(r.stderr, r"pythonModule: trainer\.task imports tensorflow "
                                   r"\(\S*trainer/task\.py, line 6\), but /\S+python3")
        self.assertIn("--runtime-version or masterConfig.imageUri", r.stderr)
        status, listing = self.api("GET", "/v1/projects/p/jobs")
        self.assertFalse(listing.get("jobs"), listing)

        # The Vertex form, on a PyTorch image this machine has.
        archive = os.path.join(self.tmp, "tfjob-0.1.tar.gz")
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(os.path.join(root, "trainer"), arcname="tfjob-0.1/trainer")
        self.stoker("storage", "cp", archive, "gs://code/tfjob-0.1.tar.gz")
        status, body = self.api("POST", self.project_path, {
            "displayName": "tf", "jobSpec": {"workerPoolSpecs": [{
                "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
                "pythonPackageSpec": {"executorImageUri": IMAGE, "pythonModule": "trainer.task",
                                      "packageUris": ["gs://code/tfjob-0.1.tar.gz"]}}]}})
        self.assertEqual(status, 400, body)
        self.assertIn("jobSpec.workerPoolSpecs[0].pythonPackageSpec.pythonModule: trainer.task "
                      "imports tensorflow (tfjob-0.1/trainer/task.py, line 6)",
                      body["error"]["message"])

        # A trainer whose optional import is guarded, or that imports only
        # what the interpreter has, runs as before.
        with open(os.path.join(root, "trainer", "task.py"), "w") as f:
            f.write("try:\n    import tensorflow\nexcept ImportError:\n    print('no tf')\n")
        r = self.stoker("jobs", "submit", "training", "tf_job2",
                        "--package-path", os.path.join(root, "trainer"),
                        "--module-name", "trainer.task", "--region", "us-central1", "--stream-logs")
        self.assertIn("no tf", r.stdout)

    def test_ai_platform_package_job_gets_job_dir_and_user_args(self):
        self.stoker("storage", "mb", "gs://out")
        root = self.package("legacy", {
            "trainer/__init__.py": "",
            "trainer/task.py": "import extra_mod\nprint(extra_mod.VALUE, flush=True)\n" + TRAINER})
        extra = self.extra_archive(os.path.join(self.tmp, "extra-1.0.tar.gz"))
        r = self.stoker("jobs", "submit", "training", "job_1",
                        "--package-path", os.path.join(root, "trainer"), "--module-name", "trainer.task",
                        "--packages", extra,
                        "--job-dir", "gs://out/j1", "--scale-tier", "basic",
                        "--staging-bucket", "gs://ignored", "--labels=team=ml",
                        "--stream-logs", "--", "--epochs=2")
        self.assertIn("Job [job_1] submitted successfully.", r.stdout)
        self.assertIn("WARNING: --staging-bucket gs://ignored is not used", r.stderr)
        self.assertIn("ended: SUCCEEDED", r.stdout)
        self.assertIn("extra ok", r.stdout)
        local = os.path.join(self.data, "buckets", "out", "j1")
        args = json.loads(re.search(r"trainer args: (.*)", r.stdout).group(1))
        self.assertEqual(args, ["--epochs=2", "--job-dir=" + local])
        model_dir = re.search(r"model dir: (.*)", r.stdout).group(1)
        self.assertTrue(model_dir.startswith(local + "/"), model_dir)

        # The legacy REST API shows it in its own shape.
        status, j = self.api("GET", "/v1/projects/p/jobs/job_1")
        self.assertEqual(status, 200, j)
        self.assertEqual(j["jobId"], "job_1")
        self.assertEqual(j["state"], "SUCCEEDED")
        self.assertEqual(j["labels"], {"team": "ml"})
        ti = j["trainingInput"]
        self.assertEqual(ti["pythonModule"], "trainer.task")
        self.assertEqual(ti["jobDir"], "gs://out/j1")
        self.assertEqual(ti["scaleTier"], "BASIC")
        self.assertEqual(ti["args"], ["--epochs=2"])
        self.assertEqual(len(ti["packageUris"]), 2)
        for t in ("createTime", "startTime", "endTime"):
            self.assertIn(t, j)
        status, listing = self.api("GET", "/v1/projects/p/jobs")
        self.assertEqual([x["jobId"] for x in listing["jobs"]], ["job_1"])
        status, listing = self.api("GET", "/v1/projects/p/jobs?filter=state%3DRUNNING")
        self.assertEqual(listing["jobs"], [])
        status, listing = self.api("GET", "/v1/projects/other/jobs")
        self.assertEqual(listing["jobs"], [])

        # A jobId is unique in its project.
        status, body = self.api("POST", "/v1/projects/p/jobs", {"jobId": "job_1", "trainingInput": ti})
        self.assertEqual(status, 409, body)
        self.assertEqual(body["error"]["status"], "ALREADY_EXISTS")
        r = self.stoker("jobs", "submit", "training", "job_1", "--package-path",
                        os.path.join(root, "trainer"), "--module-name", "trainer.task", check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("already exists", r.stderr)

        # The job commands take the jobId.
        d = json.loads(self.stoker("--format", "json", "jobs", "describe", "job_1").stdout)
        self.assertEqual(d["state"], "JOB_STATE_SUCCEEDED")
        self.assertEqual(d["displayName"], "job_1")
        self.assertIn("trainer args:", self.stoker("jobs", "logs", "job_1").stdout)

    def test_ai_platform_config_runs_master_workers_and_parameter_servers(self):
        root = self.package("legacy", {"trainer/__init__.py": "", "trainer/task.py": TRAINER})
        config = self.write("job.yaml", """
trainingInput:
  scaleTier: CUSTOM
  masterType: n1-standard-4
  workerType: n1-standard-4
  workerCount: 1
  parameterServerType: n1-standard-4
  parameterServerCount: 1
  scheduling: {maxRunningTime: 7200s}
labels: {source: config}
""")
        r = self.stoker("jobs", "submit", "training", "job_cfg", "--config", config,
                        "--package-path", os.path.join(root, "trainer"), "--module-name", "trainer.task",
                        "--stream-logs")
        self.assertIn("ended: SUCCEEDED", r.stdout)
        tasks = sorted(re.findall(r"(workerpool\d-\d): task: (\w+)", r.stdout))
        self.assertEqual(tasks, [("workerpool0-0", "workerpool0"), ("workerpool1-0", "workerpool1"),
                                 ("workerpool2-0", "workerpool2")], r.stdout)
        d = json.loads(self.stoker("--format", "json", "jobs", "describe", "job_cfg").stdout)
        pools = d["jobSpec"]["workerPoolSpecs"]
        self.assertEqual([p["machineSpec"]["machineType"] for p in pools], ["n1-standard-4"] * 3)
        self.assertEqual(d["jobSpec"]["scheduling"]["timeout"], "7200s")
        self.assertEqual(d["labels"], {"source": "config"})

    def test_ai_platform_refuses_tpus_and_bad_job_ids(self):
        root = self.package("legacy", {"trainer/__init__.py": "", "trainer/task.py": TRAINER})
        r = self.stoker("jobs", "submit", "training", "job_tpu", "--package-path",
                        os.path.join(root, "trainer"), "--module-name", "trainer.task",
                        "--scale-tier", "basic-tpu", check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--scale-tier", r.stderr)
        self.assertIn("TPU", r.stderr)
        r = self.stoker("jobs", "submit", "training", "1job", "--package-path",
                        os.path.join(root, "trainer"), "--module-name", "trainer.task", check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("jobId", r.stderr)
        status, body = self.api("POST", "/v1/projects/p/jobs", {
            "jobId": "job_tpu", "trainingInput": {"scaleTier": "BASIC_TPU", "region": "us-central1",
                                                  "pythonModule": "trainer.task",
                                                  "packageUris": ["gs://x/y.tar.gz"]}})
        self.assertEqual(status, 400, body)
        self.assertIn("TPU", body["error"]["message"])
        status, body = self.api("POST", "/v1/projects/p/jobs", {"jobId": "bad-id", "trainingInput": {}})
        self.assertEqual(status, 400, body)
        self.assertIn("jobId", body["error"]["message"])
        self.assertEqual(self.job_count(), 0)

    # ---- legacy REST ---------------------------------------------------------

    def test_legacy_rest_submit_get_list_and_cancel(self):
        ti = {"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "region": "us-central1",
              "masterConfig": {"imageUri": IMAGE,
                               "containerCommand": ["/bin/sh", "-c", "echo started; sleep 60"]},
              "runtimeVersion": "2.11"}
        status, j = self.api("POST", "/v1/projects/p/jobs", {"jobId": "long_job", "trainingInput": ti,
                                                            "labels": {"a": "b"}})
        self.assertEqual(status, 200, j)
        self.assertEqual(j["jobId"], "long_job")
        self.assertIn(j["state"], ("QUEUED", "PREPARING", "RUNNING"))
        self.assertEqual(j["trainingInput"], ti)

        def state():
            return self.api("GET", "/v1/projects/p/jobs/long_job")[1]["state"]

        wait_for(lambda: state() == "RUNNING", 30, "long_job to run")
        wait_for(lambda: "started" in self.stoker("jobs", "logs", "long_job").stdout, 30, "its log")
        status, body = self.api("POST", "/v1/projects/p/jobs/long_job:cancel", {})
        self.assertEqual((status, body), (200, {}))
        wait_for(lambda: state() == "CANCELLED", 30, "long_job to be cancelled")
        status, listing = self.api("GET", "/v1/projects/p/jobs?filter=state=CANCELLED&pageSize=5")
        self.assertEqual([x["jobId"] for x in listing["jobs"]], ["long_job"])
        # Kept but not acted on: a warning event says so.
        d = self.stoker("jobs", "describe", "long_job").stdout
        self.assertIn("trainingInput.runtimeVersion", d)
        name = json.loads(self.stoker("--format", "json", "jobs", "describe", "long_job").stdout)["name"]
        self.assertIn("/locations/us-central1/customJobs/", name)
        # The job commands cancel by jobId too.
        status, j = self.api("POST", "/v1/projects/p/jobs", {"jobId": "other_job", "trainingInput": ti})
        self.assertEqual(status, 200, j)
        self.stoker("jobs", "cancel", "other_job")
        wait_for(lambda: self.api("GET", "/v1/projects/p/jobs/other_job")[1]["state"] == "CANCELLED",
                 30, "other_job to be cancelled")
        status, body = self.api("GET", "/v1/projects/p/jobs/absent")
        self.assertEqual(status, 404, body)
        status, body = self.api("POST", "/v1/projects/p/jobs/long_job:cancel", {})
        self.assertEqual(status, 400, body)

    def test_ai_platform_hyperparameters_run_as_a_tuning_job(self):
        self.stoker("storage", "mb", "gs://out")
        root = self.package("hp", {
            "trainer/__init__.py": "",
            "trainer/task.py": (
                "import argparse, hypertune\n"
                "p = argparse.ArgumentParser()\n"
                "p.add_argument('--lr', type=float)\n"
                "p.add_argument('--layers', type=int)\n"
                "p.add_argument('--job-dir')\n"
                "a = p.parse_args()\n"
                "hypertune.HyperTune().report_hyperparameter_tuning_metric('acc', 1 - abs(a.lr - 0.01), 1)\n")})
        config = self.write("hp.yaml", """
trainingInput:
  scaleTier: BASIC
  hyperparameters:
    goal: MAXIMIZE
    hyperparameterMetricTag: acc
    maxTrials: 3
    maxParallelTrials: 2
    enableTrialEarlyStopping: true
    params:
    - {parameterName: lr, type: DOUBLE, minValue: 0.001, maxValue: 0.1, scaleType: UNIT_LOG_SCALE}
    - {parameterName: layers, type: INTEGER, minValue: 1, maxValue: 4}
""")
        r = self.stoker("jobs", "submit", "training", "hp_job_1", "--config", config,
                        "--package-path", os.path.join(root, "trainer"), "--module-name", "trainer.task",
                        "--job-dir", "gs://out/hp", "--stream-logs", timeout=180)
        self.assertIn("as a hyperparameter tuning job", r.stderr)
        # It streams every trial's logs, then shows the legacy Job with its trials.
        self.assertIn("Job [hp_job_1] ended: SUCCEEDED", r.stderr)
        self.assertIn("state: SUCCEEDED", r.stdout)
        self.assertIn("completedTrialCount: 3", r.stdout)
        study = json.loads(self.stoker("--format", "json", "hptuning", "describe", "1").stdout)
        self.assertEqual(study["displayName"], "hp_job_1")
        self.assertEqual(len(study["trials"]), 3)
        self.assertIn("medianAutomatedStoppingSpec", study["studySpec"])
        self.assertTrue(all(t["state"] == "SUCCEEDED" for t in study["trials"]))
