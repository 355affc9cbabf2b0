"""The official Node clients of Vertex AI and Cloud Storage,
@google-cloud/aiplatform and @google-cloud/storage from npm (pinned in
tests/node/package-lock.json, unmodified), against a real stokerd:
tests/node/aiplatform_client.js creates, reads, lists, waits for, cancels
and deletes jobs and a tuning job over the REST transport, checking the
client's view; this test checks its summary and, with plain REST, what the
daemon answers (enum names, states, deletions). tests/node/storage_client.js
does the same for buckets and objects (uploads of both kinds, listings,
preconditions, metadata, copies, compose).

Needs node and `npm ci --prefix tests/node` (scripts/install-deps.sh --test
does both); skips without them, and fails under STOKER_TEST_REQUIRE_ALL=1."""
import json
import os
import shutil
import subprocess

from harness import IMAGE, SOURCE, StokerTestCase, main, read_text, skip_or_fail

NODE_DIR = os.path.join(SOURCE, "tests", "node")
SCRIPT = os.path.join(NODE_DIR, "aiplatform_client.js")
STORAGE_SCRIPT = os.path.join(NODE_DIR, "storage_client.js")
PACKAGE_SCRIPT = os.path.join(NODE_DIR, "package_job.js")

TASK = """import argparse, os
p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int)
a = p.parse_args()
model_dir = os.environ["AIP_MODEL_DIR"]
os.makedirs(model_dir, exist_ok=True)
with open(os.path.join(model_dir, "model.txt"), "w") as f:
    f.write("trained %d epochs" % a.epochs)
print("model written to", model_dir)
"""
INSTALL = "run scripts/install-deps.sh --test (it installs nodejs and runs npm ci --prefix tests/node)"


class NodeClientTest(StokerTestCase):
    # A declared T4 (no NVML): the GPU job runs on any machine, and one for an
    # A100 can never run, which the daemon refuses at once.
    config = StokerTestCase.config + "inventory: {gpus: [{type: NVIDIA_TESLA_T4}]}\n"

    def setUp(self):
        node = shutil.which("node")
        if node is None:
            skip_or_fail(self, "node is not installed; " + INSTALL)
        for package in ("aiplatform", "storage"):
            if not os.path.isfile(os.path.join(NODE_DIR, "node_modules", "@google-cloud", package,
                                               "package.json")):
                skip_or_fail(self, "tests/node/node_modules lacks @google-cloud/%s; %s" %
                             (package, INSTALL))
        self.node = node
        super().setUp()

    def run_client(self, *args, script=SCRIPT):
        env = dict(os.environ, STOKER_TOKEN=self.daemon.token)
        cmd = [self.node, script, "--url", self.daemon.url] + (
            ["--project", "p", "--location", "l", "--image", IMAGE] if script == SCRIPT else []) + list(args)
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=420, cwd=NODE_DIR)
        if r.returncode != 0:
            self.fail("%s exited %d:\n%s\n%s" % (os.path.basename(script), r.returncode,
                                                 r.stdout[-3000:], r.stderr[-6000:]))
        lines = r.stdout.strip().splitlines()
        self.assertTrue(lines, "no summary on stdout; stderr:\n" + r.stderr[-3000:])
        return json.loads(lines[-1])

    def test_the_official_node_client_runs_cancels_lists_and_deletes_jobs_and_studies(self):
        s = self.run_client("--gpu", "NVIDIA_TESLA_T4")
        self.assertRegex(s["client"]["version"], r"^7\.", s["client"])
        jobs = "/v1/projects/p/locations/l/customJobs/"

        # A plain job ran; the client saw it succeed.
        self.assertEqual(s["hello"]["finalState"], "JOB_STATE_SUCCEEDED", s["hello"])

        # The accelerator went out as a number, is stored and answered by name.
        gpu = s["gpu"]
        self.assertEqual(gpu["sentAcceleratorType"], 5, gpu)
        self.assertEqual(gpu["finalState"], "JOB_STATE_SUCCEEDED", gpu)
        self.assertEqual(gpu["answeredAcceleratorType"], "NVIDIA_TESLA_T4", gpu)
        status, raw = self.api("GET", "/v1/" + gpu["name"])
        self.assertEqual(status, 200, raw)
        machine = raw["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]
        self.assertEqual(machine["acceleratorType"], "NVIDIA_TESLA_T4", raw)
        self.assertEqual(raw["state"], "JOB_STATE_SUCCEEDED", raw)

        # An accelerator the node lacks: INVALID_ARGUMENT naming the field.
        absent = s["absentGpu"]
        self.assertEqual(absent["sentAcceleratorType"], 9, absent)
        self.assertEqual(absent["code"], 3, absent)
        self.assertIn("jobSpec.workerPoolSpecs[0].machineSpec.accelerator", absent["message"])
        self.assertIn("NVIDIA_A100_80GB", absent["message"])

        # Deleting a running job is refused; cancelling ends it CANCELLED.
        self.assertEqual(s["deleteRunning"]["code"], 9, s["deleteRunning"])
        self.assertIn("cancel it first", s["deleteRunning"]["message"])
        self.assertEqual(s["long"]["finalState"], "JOB_STATE_CANCELLED", s["long"])
        status, raw = self.api("GET", "/v1/" + s["long"]["name"])
        self.assertEqual((status, raw["state"]), (200, "JOB_STATE_CANCELLED"), raw)
        self.assertEqual(raw["error"]["code"], 1, raw)

        # The list, a job a page, followed the daemon's page tokens.
        listed = {j["name"]: j["state"] for j in s["list"]["jobs"]}
        self.assertEqual(listed.get(s["long"]["name"]), "JOB_STATE_CANCELLED", s["list"])
        self.assertEqual(listed.get(gpu["name"]), "JOB_STATE_SUCCEEDED", s["list"])
        self.assertGreaterEqual(s["list"]["pageTokens"], 2, s["list"])

        # The ended job's deletion: a done operation the client resolved and
        # fetched again; the job is gone for the client and for REST.
        d = s["delete"]
        self.assertTrue(d["done"], d)
        self.assertEqual(d["metadataType"],
                         "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata")
        self.assertEqual(d["responseType"], "type.googleapis.com/google.protobuf.Empty")
        self.assertEqual(d["getAfterDelete"]["code"], 5, d)
        self.assertIn("/ui/" + d["operation"], d["getOperationPath"])
        self.assertEqual(self.api("GET", "/v1/" + d["job"])[0], 404)
        status, op = self.api("GET", "/v1/" + d["operation"])
        self.assertEqual(status, 200, op)
        self.assertTrue(op["done"], op)
        self.assertEqual(op["response"], {"@type": "type.googleapis.com/google.protobuf.Empty"})
        self.assertNotIn(d["job"], [j["name"] for j in
                                    self.api("GET", jobs.rstrip("/"))[1].get("customJobs", [])])

        # The study: enums sent as numbers, read back as names; it ran its two
        # trials and went with them on deletion.
        st = s["study"]
        names = {"goal": "MAXIMIZE", "algorithm": "RANDOM_SEARCH", "scaleType": "UNIT_LOG_SCALE",
                 "measurementSelectionType": "BEST_MEASUREMENT"}
        self.assertEqual(st["sentEnums"], {"goal": 1, "algorithm": 3, "scaleType": 2,
                                           "measurementSelectionType": 2})
        self.assertEqual(st["createdEnums"], names)
        self.assertEqual(st["finalEnums"], names)
        self.assertEqual(st["rawEnums"], names)  # the daemon's own JSON, not the client's view
        self.assertEqual(st["finalState"], "JOB_STATE_SUCCEEDED", st)
        self.assertEqual([t["state"] for t in st["trials"]], ["SUCCEEDED", "SUCCEEDED"], st)
        self.assertEqual(st["getAfterDelete"]["code"], 5, st)
        self.assertEqual(self.api("GET", "/v1/" + st["name"])[0], 404)
        for t in st["trials"]:
            self.assertEqual(self.api("GET", "/v1/" + t["customJob"])[0], 404, t)
            self.assertFalse(os.path.exists(os.path.join(self.data, "jobs",
                                                          t["customJob"].rsplit("/", 1)[1])))
        status, op = self.api("GET", "/v1/" + st["deleteOperation"])
        self.assertEqual((status, op.get("done")), (200, True), op)


    def test_the_official_storage_client_uploads_lists_copies_and_deletes(self):
        s = self.run_client("--bucket", "node-bucket", script=STORAGE_SCRIPT)
        self.assertRegex(s["client"]["version"], r"^8\.", s["client"])
        # What went on the wire: a multipart upload, and a resumable session
        # fed by one streamed PUT that says only where it starts.
        kinds = {(u["method"], u["uploadType"], u.get("contentRange")) for u in s["uploads"]}
        self.assertIn(("POST", "multipart", None), kinds, s["uploads"])
        self.assertIn(("PUT", "resumable", "bytes 0-*/*"), kinds, s["uploads"])

        self.assertEqual(s["createAgain"]["code"], 409, s["createAgain"])
        self.assertEqual(s["bucket"]["id"], "node-bucket")
        self.assertEqual((s["bucket"]["kind"], s["bucket"]["location"], s["bucket"]["storageClass"]),
                         ("storage#bucket", "LOCAL", "STANDARD"))
        self.assertIn("node-bucket", s["bucketNames"])

        m = s["multipart"]
        self.assertEqual((m["contentType"], m["metadata"], m["size"], m["metageneration"]),
                         ("text/plain", {"owner": "node", "step": "1"}, "15", "1"), m)
        self.assertEqual(s["resumable"], {"contentType": "application/x-test", "size": "3145745"})
        self.assertEqual(s["ranged"], "really")

        self.assertEqual(s["delimited"], {"items": ["top"],
                                          "prefixes": ["a/", "b/", "data/", "notes/", "packages/"]})
        everything = ["a/1", "a/2", "a/3", "b/1", "data/big.bin", "notes/hello.txt",
                      "packages/trainer.tar.gz", "top"]
        self.assertEqual(s["paged"]["names"], everything)
        self.assertEqual(s["paged"]["all"], everything)
        self.assertEqual(s["paged"]["pages"], 4)
        self.assertEqual(s["prefixed"], ["a/1", "a/2", "a/3"])

        for failed in ("ifGenerationMatch0", "staleDelete", "staleMetageneration"):
            self.assertEqual(s[failed]["code"], 412, s[failed])
        self.assertTrue(s["deletedWithGeneration"])
        p = s["patched"]
        self.assertEqual((p["contentType"], p["metadata"], p["metageneration"], p["generation"]),
                         ("text/markdown", {"owner": "node", "step": "2", "extra": "x"}, "2",
                          m["generation"]), p)
        self.assertEqual(s["copy"], {"contentType": "text/markdown", "bytes": "hello from node",
                                     "metadata": {"owner": "node", "step": "2", "extra": "x"}})
        self.assertEqual(s["combined"], "a/1a/2b/1")
        self.assertEqual(s["deleteNonEmpty"]["code"], 409, s["deleteNonEmpty"])
        self.assertTrue(s["bucketDeleted"])
        self.assertFalse(os.path.exists(os.path.join(self.data, "buckets", "node-bucket")))


    def test_a_package_uploaded_by_the_storage_client_runs_as_a_vertex_job(self):
        import io
        import tarfile
        package = os.path.join(self.tmp, "trainer-0.1.tar.gz")
        with tarfile.open(package, "w:gz") as tar:
            for name, text in (("trainer-0.1/setup.py",
                                "from setuptools import setup\nsetup(name='trainer', version='0.1', "
                                "packages=['trainer'])\n"),
                               ("trainer-0.1/trainer/__init__.py", ""),
                               ("trainer-0.1/trainer/task.py", TASK)):
                data = text.encode()
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        s = self.run_client("--package", package, "--image", IMAGE, script=PACKAGE_SCRIPT)
        self.assertEqual(s["state"], "JOB_STATE_SUCCEEDED", s)
        self.assertEqual(s["model"], "trained 3 epochs")
        self.assertIn("runs/1/model/model.txt", s["outputs"])
        job_id = s["job"].rsplit("/", 1)[1]
        self.assertIn("model written to " + os.path.join(self.data, "buckets", "node-packages",
                                                         "runs", "1", "model"),
                      read_text(os.path.join(self.data, "jobs", job_id, "workerpool0-0",
                                             "output.log")))


if __name__ == "__main__":
    main()
