"""Webhooks (docs/webhooks.md): signed JSON POSTs about jobs and budgets,
retried with backoff, delivered from a durable outbox that survives kill -9."""
import hashlib
import hmac
import http.server
import json
import os
import signal
import threading
import time

from harness import IMAGE, Daemon, StokerTestCase, container_job, wait_for

FAKE_NVML = os.path.join(os.path.dirname(os.path.abspath(__import__("harness").STOKER)), "..",
                         "src", "resources", "libfake_nvml_for_test.so")

SECRET = "s3cret-for-tests"


class Receiver:
    """An HTTP server that records signed deliveries; `status` is what it answers."""

    def __init__(self):
        self.status = 200
        self.fail_first = 0
        self.received = []   # (headers, body) of every request that got a 2xx
        self.attempts = 0
        self.bad_signatures = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["content-length"]))
                receiver.attempts += 1
                sig = dict(p.split("=", 1) for p in self.headers["x-stoker-signature"].split(","))
                want = hmac.new(SECRET.encode(), sig["t"].encode() + b"." + body,
                                hashlib.sha256).hexdigest()
                if not hmac.compare_digest(want, sig["v1"]) or abs(time.time() - int(sig["t"])) > 300:
                    receiver.bad_signatures.append(self.headers["x-stoker-signature"])
                status = receiver.status
                if receiver.fail_first > 0:
                    receiver.fail_first -= 1
                    status = 500
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()
                if 200 <= status < 300:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    receiver.received.append((headers, json.loads(body)))

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/hooks/stoker?src=test" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def events(self, kind=None):
        return [b for h, b in self.received if kind is None or b["event"] == kind]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class WebhookTest(StokerTestCase):
    def setUp(self):
        self.receiver = Receiver()
        self.config = StokerTestCase.config + """
webhooks:
  - url: %s
    secret: %s
    events: [job.state, job.failed, budget.warning]
""" % (self.receiver.url, SECRET)
        super().setUp()

    def tearDown(self):
        super().tearDown()
        self.receiver.close()

    def transitions(self, job_id):
        return [(b["from"], b["to"]) for b in self.receiver.events("job.state")
                if b["job"]["id"] == job_id]

    def test_a_jobs_transitions_arrive_signed_in_order_and_a_refused_one_is_retried(self):
        self.receiver.fail_first = 1  # the first delivery gets a 500 and must come again
        job_id = self.submit(container_job("hooked", "true"))
        self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")
        wait_for(lambda: ("JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED") in self.transitions(job_id),
                 30, "the SUCCEEDED delivery")
        self.assertEqual(self.transitions(job_id), [
            ("JOB_STATE_QUEUED", "JOB_STATE_PENDING"), ("JOB_STATE_PENDING", "JOB_STATE_RUNNING"),
            ("JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED")])
        self.assertEqual(self.receiver.bad_signatures, [])
        self.assertGreater(self.receiver.attempts, len(self.receiver.received))  # the retry
        headers, body = self.receiver.received[0]
        self.assertEqual(headers["x-stoker-event"], "job.state")
        self.assertTrue(headers["x-stoker-delivery"].isdigit())
        self.assertEqual(body["job"]["name"], "projects/p/locations/l/customJobs/" + job_id)
        self.assertIn("time", body)
        self.assertEqual(self.receiver.events("job.failed"), [])

    def test_a_failing_job_and_a_budget_past_its_warning_are_reported(self):
        job_id = self.submit(container_job("broken", "sleep 1; exit 3", machine="n1-standard-4"))
        self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_FAILED")
        failed = wait_for(lambda: self.receiver.events("job.failed"), 30, "the job.failed delivery")
        self.assertEqual(failed[0]["job"]["id"], job_id)
        self.assertIn("non-zero status of 3", failed[0]["error"]["message"])
        me = self.api("GET", "/v1/whoami")[1]["user"]
        # About a second of n1-standard-4 at Vertex's $0.2185/h is over 1e-9 of $1000.
        self.stoker("budgets", "set", "user:" + me, "--monthly-usd", "1000",
                    "--warn-at", "0.000000001")
        warned = wait_for(lambda: self.receiver.events("budget.warning") or None, 40,
                          "the budget.warning delivery")
        self.assertEqual(warned[0]["budget"]["scope"], "user:" + me)

    def test_deliveries_wait_in_the_outbox_across_a_daemon_killed_while_the_receiver_was_down(self):
        self.receiver.status = 503
        job_id = self.submit(container_job("patient", "true"))
        self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")
        wait_for(lambda: self.receiver.attempts >= 1, 30, "a first (refused) try")
        self.daemon.kill(signal.SIGKILL)
        self.receiver.status = 200
        self.daemon = Daemon(self.data, self.config).start()
        wait_for(lambda: len(self.transitions(job_id)) == 3, 60, "every delivery after the restart")
        self.assertEqual(self.transitions(job_id)[-1], ("JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"))


class GpuIdleAndBestTrialHookTest(StokerTestCase):
    """job.gpu_idle (the fake NVML's T4 is idle, its H100 37% busy, as each
    replica's supervisor samples them) and study.best_trial."""

    def setUp(self):
        if not os.path.exists(FAKE_NVML):
            self.fail("the fake NVML library is not built: " + FAKE_NVML)
        self.receiver = Receiver()
        self.config = StokerTestCase.config + """
inventory: {cpus: 32, memory_gb: 256}
gpu_telemetry_seconds: 0.5
telemetry_seconds: 0.5
webhooks:
  - url: %s
    secret: %s
    events: [job.gpu_idle, study.best_trial]
    gpu_idle_minutes: 0.04
""" % (self.receiver.url, SECRET)
        os.environ["STOKER_NVML_LIBRARY"] = os.path.abspath(FAKE_NVML)
        try:
            super().setUp()
        finally:
            del os.environ["STOKER_NVML_LIBRARY"]

    def tearDown(self):
        super().tearDown()
        self.receiver.close()

    def test_an_idle_gpu_is_reported_once_and_a_busy_one_never(self):
        idle = self.submit(container_job("idle", "sleep 6", machine="n1-standard-4",
                                         accelerator=("NVIDIA_TESLA_T4", 1)))
        busy = self.submit(container_job("busy", "sleep 6", machine="a3-highgpu-1g",
                                         accelerator=("NVIDIA_H100_80GB", 1)))
        self.assertEqual(self.wait_state(idle)["state"], "JOB_STATE_SUCCEEDED")
        self.assertEqual(self.wait_state(busy)["state"], "JOB_STATE_SUCCEEDED")
        told = wait_for(lambda: self.receiver.events("job.gpu_idle"), 30, "the job.gpu_idle delivery")
        self.assertEqual([b["job"]["id"] for b in told], [idle])  # once, and not the busy one
        self.assertGreaterEqual(told[0]["idleSeconds"], 0.04 * 60)
        self.assertEqual(told[0]["gpuBusyPercent"], 0)
        events = self.api("GET", self.project_path + "/" + idle + "/events")[1]["events"]
        self.assertTrue(any("GPUs have been under 15% busy" in e["reason"] for e in events), events)

    def test_each_new_best_trial_is_reported(self):
        trainer = ("import argparse, hypertune\n"
                   "p = argparse.ArgumentParser(); p.add_argument('--x', type=float)\n"
                   "hypertune.HyperTune().report_hyperparameter_tuning_metric("
                   "'score', p.parse_args().x, global_step=1)\n")
        body = {
            "displayName": "best", "maxTrialCount": 4, "parallelTrialCount": 1,
            "studySpec": {
                "metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
                "parameters": [{"parameterId": "x",
                                "discreteValueSpec": {"values": [1, 2, 3, 4]}}],
                "algorithm": "RANDOM_SEARCH"},
            "trialJobSpec": {"workerPoolSpecs": [{
                "machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 1,
                "containerSpec": {"imageUri": IMAGE, "command": ["python3", "-c", trainer]}}]},
        }
        studies = "/v1/projects/p/locations/l/hyperparameterTuningJobs"
        status, reply = self.api("POST", studies, body)
        self.assertEqual(status, 200, reply)
        sid = reply["name"].rsplit("/", 1)[1]
        study = wait_for(lambda: (lambda s: s if s["state"] == "JOB_STATE_SUCCEEDED" else None)(
            self.api("GET", studies + "/" + sid)[1]), 120, "the study")
        # The running maxima in the order the trials ended.
        trials = sorted(study["trials"], key=lambda t: t["endTime"])
        expected, best = [], None
        for t in trials:
            v = t["finalMeasurement"]["metrics"][0]["value"]
            if best is None or v > best:
                best = v
                expected.append((t["id"], v))
        wait_for(lambda: len(self.receiver.events("study.best_trial")) >= len(expected), 30,
                 "the study.best_trial deliveries")
        got = [(b["trial"]["id"], b["metric"]["value"]) for b in self.receiver.events("study.best_trial")]
        self.assertEqual(got, expected)
        b = self.receiver.events("study.best_trial")[-1]
        self.assertEqual(b["study"]["id"], sid)
        self.assertEqual(b["metric"], {"metricId": "score", "goal": "MAXIMIZE", "value": best})
        self.assertEqual(self.receiver.bad_signatures, [])


class WebhookConfigTest(StokerTestCase):
    def test_a_bad_hook_is_refused_at_start_naming_the_key(self):
        from harness import stokerd_refuses
        import os
        err = stokerd_refuses(os.path.join(self.tmp, "bad"), StokerTestCase.config + """
webhooks:
  - {url: "http://127.0.0.1:9/x", secret: s, events: [job.exploded]}
""")
        self.assertIn("webhooks[0].events", err)
        self.assertIn("job.exploded", err)
