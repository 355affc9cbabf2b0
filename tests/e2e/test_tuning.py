"""Hyperparameter tuning jobs end to end: trials as child jobs, the
hypertune metrics protocol, algorithms, failures, cancel and restarts."""
import json
import os
import signal

from harness import IMAGE, Daemon, StokerTestCase, read_text, wait_for

TRAINER = r'''
import argparse, json, os, time
import hypertune
p = argparse.ArgumentParser()
p.add_argument("--x", type=float, required=True)
p.add_argument("--n", type=int, required=True)
p.add_argument("--opt", required=True)
p.add_argument("--report", default="yes")
p.add_argument("--sleep", type=float, default=0.0)
a = p.parse_args()
with open(os.path.join(os.environ["TRACE_DIR"], "trial-" + os.environ["CLOUD_ML_TRIAL_ID"]), "w") as f:
    json.dump({"trial": os.environ["CLOUD_ML_TRIAL_ID"], "start": time.time(),
               "model_dir": os.environ["AIP_MODEL_DIR"], "x": a.x, "n": a.n, "opt": a.opt}, f)
score = -(a.x - 0.3) ** 2 - 0.01 * (a.n - 3) ** 2 + (0.1 if a.opt == "b" else 0.0)
hpt = hypertune.HyperTune()
for step in range(1, 4):
    time.sleep(a.sleep)
    if a.report == "yes":
        hpt.report_hyperparameter_tuning_metric("score", score - 0.1 * (3 - step), global_step=step)
with open(os.path.join(os.environ["TRACE_DIR"], "end-" + os.environ["CLOUD_ML_TRIAL_ID"]), "w") as f:
    f.write(str(time.time()))
'''


class TuningTest(StokerTestCase):

    def setUp(self):
        super().setUp()
        self.trainer = self.write("trainer.py", TRAINER)
        self.trace = os.path.join(self.tmp, "trace")
        os.makedirs(self.trace)
        self.studies = "/v1/projects/p/locations/l/hyperparameterTuningJobs"

    def study(self, algorithm="RANDOM_SEARCH", trials=6, parallel=2, extra_args=(), max_failed=0,
              x_spec=None):
        return {
            "displayName": "tune",
            "maxTrialCount": trials, "parallelTrialCount": parallel, "maxFailedTrialCount": max_failed,
            "studySpec": {
                "metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
                "parameters": [
                    x_spec or {"parameterId": "x", "doubleValueSpec": {"minValue": 0.0, "maxValue": 1.0}},
                    {"parameterId": "n", "integerValueSpec": {"minValue": 1, "maxValue": 5}},
                    {"parameterId": "opt", "categoricalValueSpec": {"values": ["a", "b"]}},
                ],
                "algorithm": algorithm,
                "measurementSelectionType": "BEST_MEASUREMENT",
            },
            "trialJobSpec": {
                "workerPoolSpecs": [{
                    "machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 1,
                    "containerSpec": {"imageUri": IMAGE, "command": ["python3", self.trainer],
                                      "args": list(extra_args),
                                      "env": [{"name": "TRACE_DIR", "value": self.trace}]}}],
                "baseOutputDirectory": {"outputUriPrefix": "gs://hpt/out/"},
            },
        }

    def submit_study(self, body):
        self.stoker("storage", "mb", "gs://hpt")
        status, reply = self.api("POST", self.studies, body)
        self.assertEqual(status, 200, reply)
        return reply["name"].rsplit("/", 1)[1]

    def get_study(self, sid):
        status, reply = self.api("GET", self.studies + "/" + sid)
        self.assertEqual(status, 200, reply)
        return reply

    def wait_study(self, sid, timeout=120):
        return wait_for(lambda: (lambda s: s if s["state"] in (
            "JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED") else None)(self.get_study(sid)),
            timeout, "study %s to end" % sid)

    def test_random_search_runs_every_trial_with_its_parameters_and_outputs(self):
        sid = self.submit_study(self.study(trials=6, parallel=2, extra_args=["--sleep=0.2"]))
        study = self.wait_study(sid)
        self.assertEqual(study["state"], "JOB_STATE_SUCCEEDED", study.get("error"))
        trials = study["trials"]
        self.assertEqual([t["id"] for t in trials], ["1", "2", "3", "4", "5", "6"])
        for t in trials:
            self.assertEqual(t["state"], "SUCCEEDED")
            params = {p["parameterId"]: p["value"] for p in t["parameters"]}
            trace = json.load(open(os.path.join(self.trace, "trial-" + t["id"])))
            # The trainer received exactly the trial's parameters.
            self.assertAlmostEqual(trace["x"], params["x"], places=9)
            self.assertEqual(trace["n"], params["n"])
            self.assertIsInstance(params["n"], int)
            self.assertEqual(trace["opt"], params["opt"])
            self.assertTrue(trace["model_dir"].endswith("/buckets/hpt/out/%s/model/" % t["id"]), trace)
            # BEST_MEASUREMENT with a score that rises every step: the last step is best.
            self.assertEqual(t["finalMeasurement"]["stepCount"], "3")
            self.assertEqual(len(t["measurements"]), 3)
        # Never more than parallelTrialCount trials at once.
        spans = []
        for t in trials:
            start = json.load(open(os.path.join(self.trace, "trial-" + t["id"])))["start"]
            end = float(read_text(os.path.join(self.trace, "end-" + t["id"])))
            spans.append((start, end))
        for s, _ in spans:
            self.assertLessEqual(sum(1 for a, b in spans if a <= s < b), 2)
        d = self.stoker("hptuning", "describe", sid).stdout
        self.assertIn("=>", d)
        self.assertIn("JOB_STATE_SUCCEEDED", d)

    def test_bayesian_default_algorithm_finds_a_good_point(self):
        sid = self.submit_study(self.study(algorithm="ALGORITHM_UNSPECIFIED", trials=14, parallel=2))
        study = self.wait_study(sid, timeout=240)
        self.assertEqual(study["state"], "JOB_STATE_SUCCEEDED", study.get("error"))
        best = max(m["value"] for t in study["trials"] for m in t["finalMeasurement"]["metrics"])
        # The optimum is 0.1 (x=0.3, n=3, opt=b).
        self.assertGreater(best, 0.05)

    def test_grid_search_refuses_double_parameters_and_enumerates_the_grid(self):
        status, reply = self.api("POST", self.studies, self.study(algorithm="GRID_SEARCH"))
        self.assertEqual(status, 400)
        self.assertIn("x", reply["error"]["message"])
        grid_x = {"parameterId": "x", "discreteValueSpec": {"values": [0.1, 0.3]}}
        sid = self.submit_study(self.study(algorithm="GRID_SEARCH", trials=100, parallel=4, x_spec=grid_x))
        study = self.wait_study(sid, timeout=240)
        self.assertEqual(study["state"], "JOB_STATE_SUCCEEDED", study.get("error"))
        seen = {tuple(sorted((p["parameterId"], p["value"]) for p in t["parameters"])) for t in study["trials"]}
        self.assertEqual(len(study["trials"]), 2 * 5 * 2)
        self.assertEqual(len(seen), 20)

    def test_trials_without_the_metric_are_infeasible_and_fail_the_study(self):
        sid = self.submit_study(self.study(trials=4, parallel=1, extra_args=["--report=no"], max_failed=2))
        study = self.wait_study(sid)
        self.assertEqual(study["state"], "JOB_STATE_FAILED")
        self.assertEqual([t["state"] for t in study["trials"]], ["INFEASIBLE", "INFEASIBLE"])
        self.assertIn("without reporting metric 'score'", study["trials"][0]["infeasibleReason"])
        self.assertIn("maxFailedTrialCount", study["error"]["message"])

    def test_cancel_stops_running_trials(self):
        sid = self.submit_study(self.study(trials=6, parallel=2, extra_args=["--sleep=30"]))
        wait_for(lambda: len(os.listdir(self.trace)) >= 2, 60, "two trials to start")
        self.stoker("hptuning", "cancel", sid)
        study = self.wait_study(sid)
        self.assertEqual(study["state"], "JOB_STATE_CANCELLED")
        self.assertEqual(len(study["trials"]), 2)
        for t in study["trials"]:
            self.assertEqual(t["state"], "INFEASIBLE")
            job = self.job(t["customJob"].rsplit("/", 1)[1])
            self.assertEqual(job["state"], "JOB_STATE_CANCELLED")

    def test_a_restarted_daemon_continues_the_same_study(self):
        sid = self.submit_study(self.study(trials=5, parallel=2, extra_args=["--sleep=0.3"]))
        wait_for(lambda: len(self.get_study(sid)["trials"]) >= 2, 60, "trials to start")
        self.daemon.kill(signal.SIGKILL)
        self.daemon = Daemon(self.data, self.config).start()
        study = self.wait_study(sid)
        self.assertEqual(study["state"], "JOB_STATE_SUCCEEDED", study.get("error"))
        self.assertEqual([t["id"] for t in study["trials"]], ["1", "2", "3", "4", "5"])
        # Each trial ran exactly once.
        self.assertEqual(sorted(f for f in os.listdir(self.trace) if f.startswith("trial-")),
                         ["trial-%d" % i for i in range(1, 6)])

    def test_cli_submit_with_overrides_and_follow(self):
        path = self.write("study.json", json.dumps(self.study(trials=10, parallel=1)))
        self.stoker("storage", "mb", "gs://hpt")
        r = self.stoker("hptuning", "submit", "--config", path, "--max-trial-count", "2",
                        "--parallel-trial-count", "2", "--algorithm", "random-search", "--follow")
        self.assertIn("trial 1 SUCCEEDED score=", r.stdout)
        self.assertIn("trial 2 SUCCEEDED", r.stdout)
        self.assertNotIn("trial 3", r.stdout)
        logs = self.stoker("hptuning", "logs", "1", "--trial", "2")
        self.assertEqual(logs.returncode, 0)


PUSHER = r'''
import json, os, sys, urllib.request
x = float(sys.argv[1].split("=", 1)[1])
with open(os.path.join(os.environ["URLS"], os.environ["CLOUD_ML_TRIAL_ID"]), "w") as f:
    f.write(os.environ["STOKER_METRICS_URL"])
for step in (1, 2):
    body = {"measurement": {"stepCount": str(step), "metrics": [{"metricId": "loss", "value": (x - 2) ** 2 + step}]}}
    req = urllib.request.Request(os.environ["STOKER_METRICS_URL"], data=json.dumps(body).encode(),
                                 method="POST", headers={"content-type": "application/json"})
    urllib.request.urlopen(req).read()
'''

STOPPER = r'''
import os, sys, time
import hypertune
kind = sys.argv[1].split("=", 1)[1]
value = {"good1": 0.9, "good2": 0.8, "good3": 0.85, "bad1": 0.1, "bad2": 0.2}[kind]
hpt = hypertune.HyperTune()
for step in range(1, 11):
    hpt.report_hyperparameter_tuning_metric("acc", value, global_step=step)
    time.sleep(0.15)
'''


class TuningExtrasTest(StokerTestCase):

    def run_study(self, script, params, metric, goal, trials, extra=None, env=None):
        path = self.write("t.py", script)
        body = {
            "displayName": "x", "maxTrialCount": trials, "parallelTrialCount": 1,
            "studySpec": dict({"metrics": [{"metricId": metric, "goal": goal}], "parameters": params},
                              **(extra or {})),
            "trialJobSpec": {"workerPoolSpecs": [{
                "machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 1,
                "containerSpec": {"imageUri": IMAGE, "command": ["python3", path],
                                  "env": [{"name": k, "value": v} for k, v in (env or {}).items()]}}]},
        }
        status, reply = self.api("POST", "/v1/projects/p/locations/l/hyperparameterTuningJobs", body)
        self.assertEqual(status, 200, reply)
        sid = reply["name"].rsplit("/", 1)[1]
        return wait_for(lambda: (lambda s: s if s["state"].endswith(("SUCCEEDED", "FAILED", "CANCELLED")) else None)(
            self.api("GET", "/v1/projects/p/locations/l/hyperparameterTuningJobs/" + sid)[1]), 120, "study")

    def test_trainers_can_push_measurements_over_http(self):
        urls = os.path.join(self.tmp, "urls")
        os.makedirs(urls)
        study = self.run_study(PUSHER, [{"parameterId": "x", "doubleValueSpec": {"minValue": 0, "maxValue": 4}}],
                               "loss", "MINIMIZE", 2, env={"URLS": urls})
        self.assertEqual(study["state"], "JOB_STATE_SUCCEEDED", study.get("error"))
        for t in study["trials"]:
            self.assertEqual(t["state"], "SUCCEEDED")
            self.assertEqual([m["stepCount"] for m in t["measurements"]], ["1", "2"])
            x = t["parameters"][0]["value"]
            self.assertAlmostEqual(t["finalMeasurement"]["metrics"][0]["value"], (x - 2) ** 2 + 2, places=5)
        status, reply = self.api("POST", "/v1/projects/p/locations/l/studies/1/trials/1:addTrialMeasurement",
                                 {"measurement": {"metrics": [{"metricId": "loss", "value": 1}]}})
        self.assertEqual(status, 400)
        self.assertIn("only while it runs", reply["error"]["message"])
        # Without a token, a push needs its own trial's key: the URL as given is
        # accepted (the trial has ended: 400), another trial's key or none is not.
        one = read_text(os.path.join(urls, "1"))
        self.assertIn(":addTrialMeasurement?key=", one)
        body = {"measurement": {"metrics": [{"metricId": "loss", "value": 1}]}}
        path = one[len(self.daemon.url):]
        self.assertEqual(self.api("POST", path, body, token="")[0], 400)
        self.assertEqual(self.api("POST", path.replace("/trials/1:", "/trials/2:"), body, token="")[0], 401)
        self.assertEqual(self.api("POST", path.split("?")[0], body, token="")[0], 401)

    def test_median_stopping_stops_trials_that_fall_behind(self):
        kinds = ["good1", "good2", "good3", "bad1", "bad2"]
        study = self.run_study(
            STOPPER, [{"parameterId": "kind", "categoricalValueSpec": {"values": kinds}}], "acc", "MAXIMIZE", 5,
            extra={"algorithm": "GRID_SEARCH", "medianAutomatedStoppingSpec": {}})
        self.assertEqual(study["state"], "JOB_STATE_SUCCEEDED", study.get("error"))
        by_kind = {t["parameters"][0]["value"]: t for t in study["trials"]}
        for k in ("good1", "good2", "good3"):
            self.assertFalse(by_kind[k].get("stoppedEarly", False))
            self.assertEqual(len(by_kind[k]["measurements"]), 10)
        for k in ("bad1", "bad2"):
            t = by_kind[k]
            self.assertTrue(t.get("stoppedEarly"), t)
            self.assertEqual(t["state"], "SUCCEEDED")  # stopped trials keep their last measurement
            self.assertLess(len(t["measurements"]), 10)
            self.assertIn("finalMeasurement", t)
