"""The official Node client of Vertex AI, @google-cloud/aiplatform from npm
(pinned in tests/node/package-lock.json, unmodified), against a real
stokerd over its REST transport: tests/node/aiplatform_client.js creates,
reads, lists, waits for, cancels and deletes jobs and a tuning job with it,
checking the client's view; this test checks its summary and, with plain
REST, what the daemon answers (enum names, states, deletions).

Needs node and `npm ci --prefix tests/node` (scripts/install-deps.sh --test
does both); skips without them, and fails under STOKER_TEST_REQUIRE_ALL=1."""
import json
import os
import shutil
import subprocess

from harness import IMAGE, SOURCE, StokerTestCase, main, skip_or_fail

NODE_DIR = os.path.join(SOURCE, "tests", "node")
SCRIPT = os.path.join(NODE_DIR, "aiplatform_client.js")
INSTALL = "run scripts/install-deps.sh --test (it installs nodejs and runs npm ci --prefix tests/node)"


class NodeClientTest(StokerTestCase):
    # A declared T4 (no NVML): the GPU job runs on any machine, and one for an
    # A100 can never run, which the daemon refuses at once.
    config = StokerTestCase.config + "inventory: {gpus: [{type: NVIDIA_TESLA_T4}]}\n"

    def setUp(self):
        node = shutil.which("node")
        if node is None:
            skip_or_fail(self, "node is not installed; " + INSTALL)
        if not os.path.isfile(os.path.join(NODE_DIR, "node_modules", "@google-cloud", "aiplatform",
                                           "package.json")):
            skip_or_fail(self, "tests/node/node_modules lacks @google-cloud/aiplatform; " + INSTALL)
        self.node = node
        super().setUp()

    def run_client(self, *args):
        env = dict(os.environ, STOKER_TOKEN=self.daemon.token)
        cmd = [self.node, SCRIPT, "--url", self.daemon.url, "--project", "p", "--location", "l",
               "--image", IMAGE] + list(args)
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=420, cwd=NODE_DIR)
        if r.returncode != 0:
            self.fail("aiplatform_client.js exited %d:\n%s\n%s" % (r.returncode, r.stdout[-3000:],
                                                                   r.stderr[-6000:]))
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


if __name__ == "__main__":
    main()
