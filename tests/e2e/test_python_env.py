"""Requirements of Python packages end to end (docs/python-packages.md,
src/runner/python_env.h): a pythonPackageSpec package's install_requires and
gcloud's requirements= are installed by the real pip, offline, from a
wheelhouse of wheels this test writes, into a cached environment that jobs
and trials starting together build once and then reuse; never into the
system Python. local-run builds the same kind of environment.

Real stokerd, stoker-run, CLI and pip (Debian's /usr/bin/python3)."""
import base64
import glob
import json
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import zipfile

from harness import IMAGE, StokerTestCase, podman_flags, read_text, skip_or_fail, wait_for

PYTHON = "/usr/bin/python3"
JOBS = "/v1/projects/p/locations/l/customJobs"
STUDIES = "/v1/projects/p/locations/l/hyperparameterTuningJobs"

# The trainer: imports the requirement, says where it came from, and reports
# a metric when it runs as a trial.
TASK = """
import os, sys
import stoker_e2e_top
print("top value", stoker_e2e_top.VALUE, "from", stoker_e2e_top.__file__, flush=True)
if os.environ.get("CLOUD_ML_TRIAL_ID"):
    import hypertune
    hypertune.HyperTune().report_hyperparameter_tuning_metric("score", 1.0, global_step=1)
"""


def write_wheel(directory, name, version, source, requires=()):
    """A pure-Python wheel: a zip with the module and dist-info METADATA,
    WHEEL and RECORD."""
    dist = "%s-%s.dist-info" % (name, version)
    files = {
        name + ".py": source,
        dist + "/METADATA": "Metadata-Version: 2.1\nName: %s\nVersion: %s\n%s" % (
            name, version, "".join("Requires-Dist: %s\n" % r for r in requires)),
        dist + "/WHEEL": "Wheel-Version: 1.0\nGenerator: stoker-e2e\nRoot-Is-Purelib: true\n"
                         "Tag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append("%s,sha256=%s,%d" % (path, digest.decode(), len(text.encode())))
    files[dist + "/RECORD"] = "\n".join(record + [dist + "/RECORD,,"]) + "\n"
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "%s-%s-py3-none-any.whl" % (name, version))
    with zipfile.ZipFile(path, "w") as z:
        for p, text in files.items():
            z.writestr(p, text)
    return path


def write_tree(root, files):
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    return root


class PythonEnvTest(StokerTestCase):

    def setUp(self):
        if subprocess.run([PYTHON, "-m", "pip", "--version"], capture_output=True).returncode != 0:
            skip_or_fail(self, PYTHON + " has no pip (apt-get install python3-pip)")
        super().setUp()
        # The default wheelhouse: <data dir>/wheelhouse.
        self.wheels = os.path.join(self.data, "wheelhouse")
        write_wheel(self.wheels, "stoker_e2e_dep", "1.0", "VALUE = 41\n")
        write_wheel(self.wheels, "stoker_e2e_top", "2.0",
                    "import stoker_e2e_dep\nVALUE = stoker_e2e_dep.VALUE + 1\n",
                    ["stoker_e2e_dep>=1.0"])
        self.stoker("storage", "mb", "gs://pkgs")

    def sdist(self, name, requires):
        """Stages an sdist as setuptools writes one (PKG-INFO, egg-info with
        requires.txt) whose module trainer.task runs TASK; returns its URI."""
        top = "%s-0.1" % name
        root = write_tree(os.path.join(self.tmp, "sdist-" + name), {
            top + "/PKG-INFO": "Metadata-Version: 2.1\nName: %s\nVersion: 0.1\n" % name,
            top + "/setup.py": "from setuptools import setup\nsetup(name=%r)\n" % name,
            top + "/%s.egg-info/PKG-INFO" % name: "Metadata-Version: 2.1\nName: %s\nVersion: 0.1\n" % name,
            top + "/%s.egg-info/requires.txt" % name: "".join(r + "\n" for r in requires) +
                                                      "\n[test]\nstoker_e2e_not_needed\n",
            top + "/trainer/__init__.py": "",
            top + "/trainer/task.py": TASK,
        })
        archive = os.path.join(self.tmp, top + ".tar.gz")
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(os.path.join(root, top), arcname=top)
        uri = "gs://pkgs/" + top + ".tar.gz"
        self.stoker("storage", "cp", archive, uri)
        return uri

    def package_pool(self, uri):
        return {"machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 1,
                "pythonPackageSpec": {"executorImageUri": IMAGE, "packageUris": [uri],
                                      "pythonModule": "trainer.task"}}

    def env_lines(self, log):
        return re.findall(r"^stoker-run: requirements \[(.*)\]: environment ([0-9a-f]{12}) "
                          r"(built|reused) in ([0-9.]+) (s|ms)", log, re.M)

    def logs_of_job(self, job_id):
        paths = glob.glob(os.path.join(self.data, "jobs", job_id, "**", "output.log"),
                          recursive=True)
        self.assertTrue(paths, "no replica log of job " + job_id)
        return [read_text(p) for p in sorted(paths)]

    def test_requirements_are_built_once_for_jobs_and_trials_starting_together_then_reused(self):
        uri = self.sdist("trainer", ["stoker_e2e_top", "numpy>=1.0"])
        # Three jobs and a study of two trials at once: five replicas want the
        # same environment at the same time.
        jobs = [self.submit({"displayName": "a%d" % i, "jobSpec": {"workerPoolSpecs": [
            self.package_pool(uri)]}}) for i in range(3)]
        status, reply = self.api("POST", STUDIES, {
            "displayName": "t", "maxTrialCount": 2, "parallelTrialCount": 2,
            "studySpec": {"metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
                          "parameters": [{"parameterId": "x", "doubleValueSpec":
                                          {"minValue": 0, "maxValue": 1}}],
                          "algorithm": "RANDOM_SEARCH"},
            "trialJobSpec": {"workerPoolSpecs": [self.package_pool(uri)]}})
        self.assertEqual(status, 200, reply)
        study = reply["name"].rsplit("/", 1)[1]
        for job in jobs:
            done = self.wait_state(job, timeout=180)
            self.assertEqual(done["state"], "JOB_STATE_SUCCEEDED", done.get("error"))
        result = wait_for(lambda: (lambda s: s if s["state"].endswith(
            ("SUCCEEDED", "FAILED", "CANCELLED")) else None)(
                self.api("GET", STUDIES + "/" + study)[1]), 180, "the study")
        self.assertEqual(result["state"], "JOB_STATE_SUCCEEDED", result.get("error"))

        logs = []
        for d in sorted(os.listdir(os.path.join(self.data, "jobs"))):
            logs += self.logs_of_job(d)
        self.assertEqual(len(logs), 5, logs)
        lines = [self.env_lines(log) for log in logs]
        for log, found in zip(logs, lines):
            self.assertEqual(len(found), 1, log)
            self.assertIn("top value 42 from " + os.path.join(self.data, "envs", "pip"), log)
        self.assertEqual({f[0][0] for f in lines}, {"numpy>=1.0, stoker_e2e_top"})
        self.assertEqual(len({f[0][1] for f in lines}), 1, lines)  # one environment
        self.assertEqual(sorted(f[0][2] for f in lines), ["built"] + ["reused"] * 4, lines)

        # A later job reuses it at once.
        later = self.submit({"displayName": "b", "jobSpec": {"workerPoolSpecs": [
            self.package_pool(uri)]}})
        self.assertEqual(self.wait_state(later, timeout=120)["state"], "JOB_STATE_SUCCEEDED")
        (reuse,) = self.env_lines(self.logs_of_job(later)[0])
        self.assertEqual(reuse[1:3], (lines[0][0][1], "reused"))
        self.assertEqual(reuse[4], "ms")
        self.assertLess(float(reuse[3]), 1000)
        # The job's events say it too (apart from the trainer's run time).
        events = [e["reason"] for e in self.api("GET", JOBS + "/" + later + "/events")[1]["events"]]
        self.assertTrue([e for e in events if e.startswith(
            "workerpool0-0, attempt 1: requirements [numpy>=1.0, stoker_e2e_top]: environment %s "
            "reused in" % reuse[1])], events)

        # numpy is Debian's: not installed again. And the system Python got nothing.
        env_files = [os.path.relpath(p, self.data) for p in
                     glob.glob(os.path.join(self.data, "envs", "pip", "*", "**"), recursive=True)]
        self.assertFalse([p for p in env_files if "numpy" in p], env_files)
        self.assertTrue([p for p in env_files if p.endswith("stoker_e2e_dep.py")], env_files)
        r = subprocess.run([PYTHON, "-s", "-c", "import stoker_e2e_top"], capture_output=True)
        self.assertNotEqual(r.returncode, 0)

    def test_a_requirement_missing_from_the_wheelhouse_fails_the_job_with_the_fix(self):
        uri = self.sdist("needy", ["stoker_e2e_absent>=3"])
        job = self.submit({"displayName": "m", "jobSpec": {"workerPoolSpecs": [
            self.package_pool(uri)]}})
        done = self.wait_state(job, timeout=120)
        self.assertEqual(done["state"], "JOB_STATE_FAILED")
        message = done["error"]["message"]
        self.assertIn("requirements [stoker_e2e_absent>=3] could not be installed", message)
        self.assertIn("No matching distribution found for stoker_e2e_absent", message)
        self.assertIn("put wheels of them and of their dependencies into the wheelhouse " +
                      self.wheels, message)
        self.assertIn("python_packages.index_url", message)
        log = self.logs_of_job(job)[0]
        self.assertIn("stoker-run: requirements [stoker_e2e_absent>=3] could not be installed", log)
        self.assertNotIn("top value", log)  # the trainer never ran
        # Nothing half-built is left; with the wheel added, the next job runs.
        self.assertEqual([p for p in glob.glob(os.path.join(self.data, "envs", "pip", "*"))
                          if os.path.isdir(p)], [])
        write_wheel(self.wheels, "stoker_e2e_absent", "3.0", "VALUE = 3\n")
        again = self.submit({"displayName": "m2", "jobSpec": {"workerPoolSpecs": [
            self.package_pool(self.sdist("needy2", ["stoker_e2e_absent>=3", "stoker_e2e_top"]))]}})
        self.assertEqual(self.wait_state(again, timeout=120)["state"], "JOB_STATE_SUCCEEDED")

    def test_gcloud_requirements_go_with_the_local_package(self):
        root = write_tree(os.path.join(self.tmp, "proj"), {
            "trainer/__init__.py": "", "trainer/task.py": TASK})
        r = self.stoker(
            "ai", "custom-jobs", "create", "--display-name=gcloud-reqs",
            "--worker-pool-spec=machine-type=e2-standard-2,executor-image-uri=%s,"
            "local-package-path=%s,python-module=trainer.task,requirements=stoker_e2e_top;numpy"
            % (IMAGE, root), "--follow", timeout=180)
        self.assertIn("JOB_STATE_SUCCEEDED", r.stdout)
        self.assertIn("Requirements [numpy, stoker_e2e_top] go with the package", r.stderr)
        self.assertNotIn("not installed", r.stderr)
        self.assertIn("top value 42 from " + os.path.join(self.data, "envs", "pip"), r.stdout)
        self.assertRegex(r.stdout, r"stoker-run: requirements \[numpy, stoker_e2e_top\]: "
                                   r"environment [0-9a-f]{12} built in")
        # A requirement that is a pip option or a URL is refused before anything is sent.
        for bad in ("--index-url=http://x", "evil @ https://x/evil.whl"):
            r = self.stoker(
                "ai", "custom-jobs", "create", "--display-name=bad",
                "--worker-pool-spec=machine-type=e2-standard-2,executor-image-uri=%s,"
                "local-package-path=%s,python-module=trainer.task,requirements=%s"
                % (IMAGE, root, bad), check=False)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("--worker-pool-spec[0]: requirements: requirement", r.stderr)

    def test_local_run_installs_requirements_into_its_own_cache(self):
        home = os.path.join(self.tmp, "home")
        wheels = os.path.join(self.tmp, "wheels")
        write_wheel(wheels, "stoker_e2e_dep", "1.0", "VALUE = 41\n")
        write_wheel(wheels, "stoker_e2e_top", "2.0",
                    "import stoker_e2e_dep\nVALUE = stoker_e2e_dep.VALUE + 1\n",
                    ["stoker_e2e_dep>=1.0"])
        write_tree(home, {"config.yaml": "python_packages:\n  wheelhouse: %s\n" % wheels})
        pkg = write_tree(os.path.join(self.tmp, "lr"), {"task.py": TASK})
        args = ["ai", "custom-jobs", "local-run", "--executor-image-uri=" + IMAGE,
                "--local-package-path=" + pkg, "--script=task.py",
                "--requirements=stoker_e2e_top,numpy"]
        first = self.stoker(*args, env={"STOKER_HOME": home})
        self.assertIn("top value 42 from " + os.path.join(home, "envs", "pip"), first.stdout)
        self.assertRegex(first.stderr, r"local-run: requirements \[numpy, stoker_e2e_top\]: "
                                       r"environment [0-9a-f]{12} built in")
        second = self.stoker(*args, env={"STOKER_HOME": home})
        self.assertRegex(second.stderr, r"environment [0-9a-f]{12} reused in \d+ ms")
        missing = self.stoker(*(args[:-1] + ["--requirements=stoker_e2e_absent"]),
                              env={"STOKER_HOME": home}, check=False)
        self.assertNotEqual(missing.returncode, 0)
        self.assertIn("No matching distribution found for stoker_e2e_absent", missing.stderr)
        self.assertIn("into the wheelhouse " + wheels, missing.stderr)
        self.assertIn("python_packages in " + os.path.join(home, "config.yaml"), missing.stderr)

    def test_a_pool_in_a_container_gets_its_requirements_from_the_images_own_pip(self):
        base = "localhost/stoker-base:bookworm"  # test_containers.py makes it (with pip)
        if (shutil.which("podman") is None or
                subprocess.run(["podman", "image", "exists", base]).returncode != 0):
            skip_or_fail(self, "podman with %s (scripts/container-base-image.sh) is needed" % base)
        uri = self.sdist("boxed", ["stoker_e2e_top"])
        pool = self.package_pool(uri)
        pool["pythonPackageSpec"]["executorImageUri"] = base
        jobs = []
        for name in ("first", "second"):
            job = self.submit({"displayName": name, "jobSpec": {"workerPoolSpecs": [pool]}})
            jobs.append(job)
            self.assertEqual(self.wait_state(job, timeout=240)["state"], "JOB_STATE_SUCCEEDED",
                             self.logs_of_job(job))
        first, second = (self.logs_of_job(j)[0] for j in jobs)
        # Installed by pip in the image, into the cache on the host, mounted
        # read-only into the trainer's container; the second job reuses it.
        self.assertEqual([e[2] for e in self.env_lines(first)], ["built"], first)
        self.assertEqual([e[2] for e in self.env_lines(second)], ["reused"], second)
        self.assertEqual(self.env_lines(first)[0][1], self.env_lines(second)[0][1])
        key = self.env_lines(first)[0][1]
        self.assertRegex(first, r"top value 42 from %s/envs/pip/%s[0-9a-f]*/.*stoker_e2e_top\.py"
                         % (re.escape(self.data), key))
        # The environment is the image's: the interpreter named in its key is
        # the image's, not the host's.
        marker = glob.glob(os.path.join(self.data, "envs", "pip", key + "*", "*.json"))
        self.assertTrue(marker)
        self.assertEqual(json.loads(read_text(marker[0]))["python"], "python3")
        # pip ran as an account of no one's (the image is the submitter's
        # code); the finished environment is root's, closed to trainers.
        env_dir = os.path.dirname(marker[0])
        for root, dirs, files in os.walk(env_dir):
            for name in dirs + files + [""]:
                st = os.lstat(os.path.join(root, name))
                self.assertEqual((st.st_uid, st.st_mode & 0o022), (0, 0),
                                 os.path.join(root, name))
        events = json.dumps(self.api("GET", JOBS + "/" + jobs[0] + "/events")[1])
        self.assertIn("environment " + key, events)

    def test_local_run_in_an_image_installs_requirements_with_the_images_pip(self):
        base = "localhost/stoker-base:bookworm"
        if (shutil.which("podman") is None or
                subprocess.run(["podman", "image", "exists", base]).returncode != 0):
            skip_or_fail(self, "podman with %s (scripts/container-base-image.sh) is needed" % base)
        home = os.path.join(self.tmp, "home")
        write_tree(home, {"config.yaml": "python_packages:\n  wheelhouse: %s\n" % self.wheels})
        pkg = write_tree(os.path.join(self.tmp, "lrc"), {
            "task.py": TASK + "print('in image', os.path.exists('/run/.containerenv'))\n"})
        r = self.stoker("ai", "custom-jobs", "local-run", "--executor-image-uri=" + base,
                        "--local-package-path=" + pkg, "--script=task.py",
                        "--requirements=stoker_e2e_top", env={"STOKER_HOME": home})
        self.assertIn("top value 42 from " + os.path.join(home, "envs", "pip"), r.stdout)
        self.assertIn("in image True", r.stdout)
        self.assertIn("local-run: installing requirements with the Python of image " + base,
                      r.stderr)
        self.assertIn("in a container of " + base, r.stderr)

    def test_an_image_without_pip_fails_with_the_fix(self):
        base = "localhost/stoker-base:bookworm"
        if (shutil.which("podman") is None or
                subprocess.run(["podman", "image", "exists", base]).returncode != 0):
            skip_or_fail(self, "podman with %s (scripts/container-base-image.sh) is needed" % base)
        image = "localhost/stoker-e2e/no-pip:%d" % os.getpid()
        ctx = write_tree(os.path.join(self.tmp, "nopip"), {
            "Dockerfile": "FROM %s\nRUN rm -rf /usr/lib/python3/dist-packages/pip\n" % base})
        flags = [f for f in podman_flags()]
        r = subprocess.run(["podman", "build", *flags, "-t", image, ctx], capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.addCleanup(subprocess.run, ["podman", "rmi", "--force", image], capture_output=True)
        pool = self.package_pool(self.sdist("nopip", ["stoker_e2e_top"]))
        pool["pythonPackageSpec"]["executorImageUri"] = image
        job = self.submit({"displayName": "nopip", "jobSpec": {"workerPoolSpecs": [pool]}})
        done = self.wait_state(job, timeout=180)
        self.assertEqual(done["state"], "JOB_STATE_FAILED")
        message = json.dumps(done)
        self.assertIn("image " + image + " has no pip", message)
        self.assertIn("apt-get install -y python3-pip", message)


if __name__ == "__main__":
    import unittest
    unittest.main()
