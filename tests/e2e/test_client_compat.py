"""What the official client libraries' REST transports send and expect, over
plain HTTP: enums as numbers, DELETE answered by a done long-running
Operation, GET of that operation under /v1/ and /ui/, and errors in the
google.rpc.Status shape."""
import os

from harness import IMAGE, Daemon, StokerTestCase, container_job, main, wait_for

JOBS = "/v1/projects/p/locations/l/customJobs"
STUDIES = "/v1/projects/p/locations/l/hyperparameterTuningJobs"


class ClientCompatTest(StokerTestCase):
    config = StokerTestCase.config + "inventory: {gpus: [{type: NVIDIA_TESLA_T4}]}\n"

    def assert_error(self, status, body, code, rpc_status, *needles):
        self.assertEqual(status, code, body)
        self.assertEqual(body["error"]["code"], code, body)
        self.assertEqual(body["error"]["status"], rpc_status, body)
        for n in needles:
            self.assertIn(n, body["error"]["message"])

    def gpu_job(self, name, script):
        job = container_job(name, script)
        machine = job["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]
        machine["acceleratorType"] = 5  # NVIDIA_TESLA_T4, as the Node and Python clients send it
        machine["acceleratorCount"] = 1
        job["jobSpec"]["scheduling"] = {"strategy": 0}
        return job

    def test_a_gpu_job_with_numeric_enums_runs_and_is_answered_with_names(self):
        status, created = self.api("POST", JOBS, self.gpu_job("numeric", "echo ok"))
        self.assertEqual(status, 200, created)
        machine = created["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]
        self.assertEqual(machine["acceleratorType"], "NVIDIA_TESLA_T4")
        job_id = created["name"].rsplit("/", 1)[1]
        done = self.wait_state(job_id)
        self.assertEqual(done["state"], "JOB_STATE_SUCCEEDED", done)
        self.assertEqual(done["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"],
                         "NVIDIA_TESLA_T4")
        self.assertNotIn("strategy", done["jobSpec"].get("scheduling", {}))

        bad = self.gpu_job("unknown", "echo no")
        bad["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"] = 99
        status, body = self.api("POST", JOBS, bad)
        self.assert_error(status, body, 400, "INVALID_ARGUMENT",
                          "jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType: 99 is not a "
                          "number of enum AcceleratorType", "NVIDIA_TESLA_T4 (5)")

    def test_a_study_with_numeric_enums_is_answered_with_names_and_deleted_whole(self):
        self.stoker("storage", "mb", "gs://hpt")
        study = {
            "displayName": "numeric",
            "maxTrialCount": 1, "parallelTrialCount": 1,
            "studySpec": {
                "metrics": [{"metricId": "score", "goal": 1}],
                "parameters": [{"parameterId": "x", "scaleType": 1,
                                "doubleValueSpec": {"minValue": 0.1, "maxValue": 1.0}}],
                "algorithm": 3,
                "measurementSelectionType": 2,
            },
            "trialJobSpec": {
                "workerPoolSpecs": [{
                    "machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 1,
                    "containerSpec": {"imageUri": IMAGE, "command": ["/bin/sh", "-c", "exit 0"]}}],
                "baseOutputDirectory": {"outputUriPrefix": "gs://hpt/out/"},
            },
        }
        status, created = self.api("POST", STUDIES, study)
        self.assertEqual(status, 200, created)
        spec = created["studySpec"]
        self.assertEqual(spec["metrics"][0]["goal"], "MAXIMIZE")
        self.assertEqual(spec["algorithm"], "RANDOM_SEARCH")
        self.assertEqual(spec["parameters"][0]["scaleType"], "UNIT_LINEAR_SCALE")
        self.assertEqual(spec["measurementSelectionType"], "BEST_MEASUREMENT")
        sid = created["name"].rsplit("/", 1)[1]

        def ended():
            s = self.api("GET", STUDIES + "/" + sid)[1]
            return s if s["state"] in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED",
                                       "JOB_STATE_CANCELLED") else None
        finished = wait_for(ended, 120, "the study to end")
        trial_jobs = [t["customJob"].rsplit("/", 1)[1] for t in finished.get("trials", [])
                      if t.get("customJob")]
        self.assertTrue(trial_jobs, finished)

        # A trial's job goes with its study, never alone.
        status, body = self.api("DELETE", JOBS + "/" + trial_jobs[0])
        self.assert_error(status, body, 400, "FAILED_PRECONDITION", "delete the tuning job")

        status, op = self.api("DELETE", STUDIES + "/" + sid)
        self.assertEqual(status, 200, op)
        self.assertTrue(op["done"], op)
        self.assertEqual(op["response"], {"@type": "type.googleapis.com/google.protobuf.Empty"})
        self.assertEqual(self.api("GET", "/v1/" + op["name"]), (200, op))
        status, body = self.api("GET", STUDIES + "/" + sid)
        self.assert_error(status, body, 404, "NOT_FOUND")
        for j in trial_jobs:
            self.assertEqual(self.api("GET", JOBS + "/" + j)[0], 404)
            self.assertFalse(os.path.exists(os.path.join(self.data, "jobs", j)))

    def test_delete_refuses_a_running_job_and_answers_a_done_operation_for_an_ended_one(self):
        gate = os.path.join(self.tmp, "gate")
        job_id = self.submit(container_job(
            "long", "while [ ! -e %s ]; do sleep 0.05; done" % gate))
        wait_for(lambda: self.job(job_id)["state"] == "JOB_STATE_RUNNING", 30, "the job to run")
        status, body = self.api("DELETE", JOBS + "/" + job_id)
        self.assert_error(status, body, 400, "FAILED_PRECONDITION", "JOB_STATE_RUNNING",
                          "cancel it first")
        self.assertEqual(self.job(job_id)["state"], "JOB_STATE_RUNNING")

        open(gate, "w").close()
        self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")
        self.assertTrue(os.path.isdir(os.path.join(self.data, "jobs", job_id)))
        # Another user neither deletes it nor learns that it exists.
        bob = self.add_user("bob")
        status, body = self.api("DELETE", JOBS + "/" + job_id, token=bob)
        self.assert_error(status, body, 404, "NOT_FOUND")

        status, op = self.api("DELETE", JOBS + "/" + job_id)
        self.assertEqual(status, 200, op)
        self.assertRegex(op["name"], r"^projects/p/locations/l/operations/\d+$")
        self.assertTrue(op["done"])
        self.assertEqual(op["metadata"]["@type"],
                         "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata")
        self.assertIn("createTime", op["metadata"]["genericMetadata"])
        self.assertEqual(op["response"], {"@type": "type.googleapis.com/google.protobuf.Empty"})
        self.assertNotIn("error", op)

        # Gone: GET is 404, list leaves it out, its files are removed.
        status, body = self.api("GET", JOBS + "/" + job_id)
        self.assert_error(status, body, 404, "NOT_FOUND")
        listed = self.api("GET", JOBS)[1].get("customJobs", [])
        self.assertNotIn(job_id, [j["name"].rsplit("/", 1)[1] for j in listed])
        self.assertFalse(os.path.exists(os.path.join(self.data, "jobs", job_id)))
        status, body = self.api("DELETE", JOBS + "/" + job_id)
        self.assert_error(status, body, 404, "NOT_FOUND")

        # The operation, in both URL forms, also after a restart; not to others.
        self.assertEqual(self.api("GET", "/v1/" + op["name"]), (200, op))
        self.assertEqual(self.api("GET", "/ui/" + op["name"]), (200, op))
        self.daemon.kill()
        self.daemon = Daemon(self.data, self.config).start()
        self.assertEqual(self.api("GET", "/ui/" + op["name"]), (200, op))
        status, body = self.api("GET", "/v1/" + op["name"], token=bob)
        self.assert_error(status, body, 404, "NOT_FOUND")
        status, body = self.api("GET", "/v1/projects/p/locations/l/operations/999999")
        self.assert_error(status, body, 404, "NOT_FOUND")
        # A new job never takes the deleted one's id.
        self.assertGreater(int(self.submit(container_job("next", "true"))), int(job_id))

    def test_errors_carry_the_google_rpc_status_names(self):
        status, body = self.api("GET", JOBS + "/424242")
        self.assert_error(status, body, 404, "NOT_FOUND")
        status, body = self.api("POST", JOBS, raw=b"{not json")
        self.assert_error(status, body, 400, "INVALID_ARGUMENT")
        status, body = self.api("GET", JOBS, token="")
        self.assert_error(status, body, 401, "UNAUTHENTICATED")
        viewer = self.add_user("vic", role="viewer")
        status, body = self.api("POST", JOBS, container_job("v", "true"), token=viewer)
        self.assert_error(status, body, 403, "PERMISSION_DENIED")


if __name__ == "__main__":
    main()
