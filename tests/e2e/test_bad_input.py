"""Bad input gets a clear error naming the field and the fix, a non-zero
exit, a 4xx from the API, and nothing is stored."""
import io
import json
import os
import tarfile

from harness import IMAGE, StokerTestCase, container_job


def package_job(uri):
    return {"displayName": "pkg", "jobSpec": {"workerPoolSpecs": [{
        "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
        "pythonPackageSpec": {"executorImageUri": IMAGE, "packageUris": [uri],
                              "pythonModule": "trainer.task"}}]}}


class BadInputTest(StokerTestCase):

    def assert_refused(self, job_text, *wants, name="job.yaml"):
        path = self.write(name, job_text)
        r = self.stoker("jobs", "submit", "--config", path, check=False)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        for want in wants:
            self.assertIn(want, r.stderr)
        self.assert_nothing_stored()
        return r

    def assert_api_refused(self, body, *wants, raw=None):
        status, reply = self.api("POST", self.project_path, body, raw=raw)
        self.assertGreaterEqual(status, 400)
        self.assertLess(status, 500)
        for want in wants:
            self.assertIn(want, reply["error"]["message"])
        self.assert_nothing_stored()

    def assert_nothing_stored(self):
        status, body = self.api("GET", self.project_path)
        self.assertEqual(body["customJobs"], [])
        self.assertFalse(os.path.exists(os.path.join(self.data, "jobs")))

    def good(self):
        return container_job("ok", "true")

    def test_malformed_yaml_names_file_and_line(self):
        r = self.assert_refused("displayName: x\njobSpec: {workerPoolSpecs: [\n", "job.yaml:")
        self.assertEqual(r.returncode, 2)
        self.assert_api_refused(None, "not valid JSON", raw=b"{not json")

    def test_missing_required_fields_are_named(self):
        job = self.good()
        del job["displayName"]
        self.assert_api_refused(job, "displayName")
        job = self.good()
        job["jobSpec"]["workerPoolSpecs"] = []
        self.assert_api_refused(job, "workerPoolSpecs")
        job = self.good()
        del job["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["machineType"]
        self.assert_api_refused(job, "jobSpec.workerPoolSpecs[0].machineSpec.machineType")
        job = self.good()
        del job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"]
        self.assert_api_refused(job, "jobSpec.workerPoolSpecs[0].containerSpec.imageUri")
        job = package_job("gs://b/p.tar.gz")
        del job["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["pythonModule"]
        self.assert_api_refused(job, "pythonPackageSpec.pythonModule")
        self.assert_refused(json.dumps(job), "pythonModule", name="job.json")

    def test_unknown_and_snake_case_fields_are_refused_with_a_hint(self):
        job = self.good()
        job["jobSpec"]["workerPoolSpecs"][0]["replicaCont"] = 1
        self.assert_api_refused(job, "replicaCont", "replicaCount")
        job = self.good()
        job["jobSpec"]["workerPoolSpecs"][0]["machine_spec"] = {}
        self.assert_refused(json.dumps(job), "machine_spec", "machineSpec")

    def test_primary_pool_must_have_one_replica(self):
        job = self.good()
        job["jobSpec"]["workerPoolSpecs"][0]["replicaCount"] = 2
        self.assert_api_refused(job, "jobSpec.workerPoolSpecs[0].replicaCount")

    def test_unmapped_image_names_the_config_key(self):
        job = self.good()
        job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"] = "gcr.io/acme/trainer:1"
        self.assert_api_refused(job, "containerSpec.imageUri", "images:", "gcr.io/acme/trainer:1")

    def test_gs_path_that_names_no_bucket_is_refused(self):
        job = self.good()
        job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"] = ["--data=gs://nosuch/x"]
        self.assert_api_refused(job, "containerSpec.args[0]", "nosuch", "stoker storage mb")
        job = self.good()
        job["jobSpec"]["baseOutputDirectory"] = {"outputUriPrefix": "gs://nosuch/out"}
        self.assert_api_refused(job, "baseOutputDirectory", "nosuch")
        self.assert_api_refused(package_job("gs://nosuch/p.tar.gz"), "packageUris[0]", "nosuch")

    def test_packages_must_be_safe_tar_gz(self):
        not_tar = self.write("notes.txt", "hello")
        self.stoker("storage", "cp", not_tar, "gs://pkgs/notes.tar.gz")
        self.assert_api_refused(package_job("gs://pkgs/notes.tar.gz"), "packageUris[0]", "gzip")
        evil = os.path.join(self.tmp, "evil.tar.gz")
        with tarfile.open(evil, "w:gz") as t:
            data = b"print('pwned')"
            info = tarfile.TarInfo("../../evil.py")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        self.stoker("storage", "cp", evil, "gs://pkgs/evil.tar.gz")
        self.assert_api_refused(package_job("gs://pkgs/evil.tar.gz"), "packageUris[0]", "..")
        self.assert_api_refused(package_job("gs://pkgs/missing.tar.gz"), "packageUris[0]", "does not exist")
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "evil.py")))

    def test_job_that_can_never_fit_is_refused_with_numbers(self):
        job = container_job("gpus", "true", accelerator=("NVIDIA_H100_80GB", 4))
        self.assert_api_refused(job, "acceleratorCount", "4x NVIDIA_H100_80GB", "0 GPU(s)")

    def test_unknown_machine_type_is_refused(self):
        job = container_job("m", "true", machine="n9-mega-1")
        self.assert_api_refused(job, "machineSpec.machineType", "n9-mega-1")

    def test_bad_bucket_paths_are_refused(self):
        src = self.write("f.txt", "x")
        r = self.stoker("storage", "cp", src, "gs://Bad_Bucket/x", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("Bad_Bucket", r.stderr)
        r = self.stoker("storage", "cp", src, "gs://okbucket/../../escape", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertFalse(os.path.exists(os.path.join(self.data, "escape")))
        status, _ = self.api("POST", "/upload/storage/v1/b/okbucket/o?name=..%2F..%2Fescape", raw=b"x")
        self.assertEqual(status, 400)
        self.assertFalse(os.path.exists(os.path.join(self.data, "escape")))
        self.assertFalse(os.path.exists(os.path.join(self.data, "buckets", "escape")))
