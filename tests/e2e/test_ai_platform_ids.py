"""AI Platform job ids name custom AND tuning jobs (issue #17).

A `trainingInput` with `hyperparameters` runs as a tuning job; its jobId
must resolve in the CLI (`jobs describe/cancel/logs JOB_ID`) and in the
legacy REST API (GET /v1/projects/P/jobs/JOB_ID, :cancel, the listing), with
`trainingOutput` filled as AI Platform fills it. Also: `logs --follow` says
what a queued job waits for and exits non-zero when the job fails or is
cancelled.
"""
import json
import os
import re
import subprocess
import threading
import unittest

from harness import STOKER, StokerTestCase, container_job, wait_for

TRAINER = (
    "import argparse, hypertune, time\n"
    "p = argparse.ArgumentParser()\n"
    "p.add_argument('--lr', type=float)\n"
    "p.add_argument('--layers', type=int)\n"
    "p.add_argument('--sleep', type=float, default=0)\n"
    "p.add_argument('--job-dir')\n"
    "a = p.parse_args()\n"
    "print('trial says lr=%s layers=%s' % (a.lr, a.layers), flush=True)\n"
    "time.sleep(a.sleep)\n"
    "hypertune.HyperTune().report_hyperparameter_tuning_metric('acc', 1 - abs(a.lr - 0.01), 7)\n")

HP_CONFIG = """
trainingInput:
  scaleTier: BASIC
  hyperparameters:
    goal: MAXIMIZE
    hyperparameterMetricTag: acc
    maxTrials: %d
    maxParallelTrials: 1
    params:
    - {parameterName: lr, type: DOUBLE, minValue: 0.001, maxValue: 0.1, scaleType: UNIT_LOG_SCALE}
    - {parameterName: layers, type: INTEGER, minValue: 1, maxValue: 4}
"""


class AiPlatformIdsTest(StokerTestCase):

    def package(self):
        root = os.path.join(self.tmp, "pkg")
        os.makedirs(os.path.join(root, "trainer"), exist_ok=True)
        for name, text in {"trainer/__init__.py": "", "trainer/task.py": TRAINER}.items():
            with open(os.path.join(root, name), "w") as f:
                f.write(text)
        return os.path.join(root, "trainer")

    def submit_tuning(self, job_id, trials=2, user_args=()):
        config = self.write(job_id + ".yaml", HP_CONFIG % trials)
        r = self.stoker("jobs", "submit", "training", job_id, "--config", config,
                        "--package-path", self.package(), "--module-name", "trainer.task",
                        "--job-dir", "gs://out/" + job_id, *(["--"] + list(user_args) if user_args else []))
        self.assertIn("Job [%s] submitted successfully." % job_id, r.stdout)
        return r

    def legacy(self, job_id):
        return self.api("GET", "/v1/projects/p/jobs/" + job_id)

    def wait_legacy(self, job_id, states=("SUCCEEDED", "FAILED", "CANCELLED"), timeout=120):
        return wait_for(lambda: (lambda s, j: j if s == 200 and j["state"] in states else None)(
            *self.legacy(job_id)), timeout, "%s to reach %s" % (job_id, states))

    def test_tuning_job_is_found_by_its_job_id_with_its_trials(self):
        self.stoker("storage", "mb", "gs://out")
        self.submit_tuning("hp_job_1")
        # The bug: the jobId of a tuning job was unknown (404) everywhere.
        status, j = self.legacy("hp_job_1")
        self.assertEqual(status, 200, j)
        self.assertEqual(j["jobId"], "hp_job_1")
        self.assertEqual(j["trainingInput"]["hyperparameters"]["hyperparameterMetricTag"], "acc")
        j = self.wait_legacy("hp_job_1")
        self.assertEqual(j["state"], "SUCCEEDED", j)
        out = j["trainingOutput"]
        self.assertIs(out["isHyperparameterTuningJob"], True)
        self.assertEqual(out["hyperparameterMetricTag"], "acc")
        self.assertEqual(out["completedTrialCount"], "2")
        self.assertEqual(len(out["trials"]), 2)
        for i, t in enumerate(out["trials"]):
            self.assertEqual(t["trialId"], str(i + 1))
            self.assertEqual(sorted(t["hyperparameters"]), ["layers", "lr"])
            self.assertTrue(all(isinstance(v, str) for v in t["hyperparameters"].values()), t)
            lr = float(t["hyperparameters"]["lr"])
            self.assertEqual(t["finalMetric"]["trainingStep"], "7")
            self.assertAlmostEqual(t["finalMetric"]["objectiveValue"], 1 - abs(lr - 0.01), places=6)
            self.assertEqual(t["state"], "SUCCEEDED")
            self.assertIs(t["isTrialStoppedEarly"], False)
            self.assertIn("startTime", t)
            self.assertIn("endTime", t)
        for k in ("createTime", "startTime", "endTime"):
            self.assertIn(k, j)

        # The CLI takes the jobId: describe as text shows the trials ...
        r = self.stoker("jobs", "describe", "hp_job_1")
        self.assertIn("state: SUCCEEDED", r.stdout)
        self.assertIn("completedTrialCount: 2", r.stdout)
        # Trial 1 is the centre of the space: lr 10^-2 (the log-scale middle), acc 1.
        self.assertRegex(r.stdout, r"\n\s+1\s+SUCCEEDED\s+1\s+7\s+layers=[23] lr=0\.0100")
        self.assertRegex(r.stdout, r"\n\s+2\s+SUCCEEDED\s+")
        # ... as JSON the legacy Job, as `ai-platform jobs describe` gives it.
        d = json.loads(self.stoker("--format", "json", "jobs", "describe", "hp_job_1").stdout)
        self.assertEqual(d["trainingOutput"]["completedTrialCount"], "2")
        # Logs: every trial's, in order.
        r = self.stoker("jobs", "logs", "hp_job_1")
        self.assertEqual(len(re.findall(r"trial says lr=", r.stdout)), 2, r.stdout)
        self.assertIn("==> trial 1", r.stderr)
        r = self.stoker("jobs", "logs", "hp_job_1", "--follow")
        self.assertEqual(r.returncode, 0)
        self.assertIn("ended: SUCCEEDED", r.stderr)

        # The listing has both kinds, oldest first.
        r = self.stoker("jobs", "submit", "training", "custom_1", "--package-path", self.package(),
                        "--module-name", "trainer.task", "--job-dir", "gs://out/c1", "--stream-logs",
                        "--", "--lr=0.01", "--layers=1")
        status, listing = self.api("GET", "/v1/projects/p/jobs")
        self.assertEqual(status, 200, listing)
        self.assertEqual([x["jobId"] for x in listing["jobs"]], ["hp_job_1", "custom_1"])
        self.assertNotIn("isHyperparameterTuningJob", listing["jobs"][1].get("trainingOutput", {}))
        # Pages of one: the token leads from one kind to the other.
        status, page = self.api("GET", "/v1/projects/p/jobs?pageSize=1")
        self.assertEqual([x["jobId"] for x in page["jobs"]], ["hp_job_1"])
        status, page = self.api("GET", "/v1/projects/p/jobs?pageSize=1&pageToken=" + page["nextPageToken"])
        self.assertEqual([x["jobId"] for x in page["jobs"]], ["custom_1"])
        self.assertNotIn("nextPageToken", page)
        status, body = self.api("GET", "/v1/projects/p/jobs?pageToken=nonsense")
        self.assertEqual(status, 400, body)
        self.assertIn("pageToken", body["error"]["message"])
        status, listing = self.api("GET", "/v1/projects/p/jobs?filter=state%3DRUNNING")
        self.assertEqual(listing["jobs"], [])

        # One jobId names one job, of either kind.
        status, body = self.api("POST", "/v1/projects/p/jobs",
                                {"jobId": "hp_job_1", "trainingInput": j["trainingInput"]})
        self.assertEqual(status, 409, body)
        ti = dict(j["trainingInput"])
        del ti["hyperparameters"]
        status, body = self.api("POST", "/v1/projects/p/jobs", {"jobId": "hp_job_1", "trainingInput": ti})
        self.assertEqual(status, 409, body)
        self.assertIn("already exists", body["error"]["message"])
        # The tuning job still answers to its Vertex id.
        self.stoker("hptuning", "describe", j["stoker"]["hyperparameterTuningJob"].rsplit("/", 1)[1])

    def test_rest_submits_a_tuning_job_and_rejects_bad_hyperparameters(self):
        self.stoker("storage", "mb", "gs://out")
        self.submit_tuning("hp_cli", trials=1)
        ti = self.legacy("hp_cli")[1]["trainingInput"]  # with the staged package
        ti["hyperparameters"]["params"][0].update(minValue=0.1, maxValue=0.01)
        status, body = self.api("POST", "/v1/projects/p/jobs", {"jobId": "bad_hp", "trainingInput": ti})
        self.assertEqual(status, 400, body)
        self.assertIn("trainingInput.hyperparameters.params[0]", body["error"]["message"])
        self.assertEqual(self.legacy("bad_hp")[0], 404)
        ti["hyperparameters"]["params"][0].update(minValue=0.01, maxValue=0.1)
        status, body = self.api("POST", "/v1/projects/p/jobs", {"jobId": "good_hp", "trainingInput": ti})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["jobId"], "good_hp")
        self.assertIs(body["trainingOutput"]["isHyperparameterTuningJob"], True)
        self.assertEqual(body["trainingOutput"]["completedTrialCount"], "0")
        j = self.wait_legacy("good_hp")
        self.assertEqual(j["state"], "SUCCEEDED", j)
        self.assertEqual(j["trainingOutput"]["completedTrialCount"], "1")

    def test_tuning_job_is_cancelled_by_its_job_id(self):
        self.stoker("storage", "mb", "gs://out")
        self.submit_tuning("hp_slow", trials=1, user_args=["--sleep=60"])
        wait_for(lambda: self.legacy("hp_slow")[1]["trainingOutput"]["trials"], 60, "a trial")
        r = self.stoker("jobs", "cancel", "hp_slow")
        self.assertIn("Cancel requested for job hp_slow", r.stdout)
        j = self.wait_legacy("hp_slow")
        self.assertEqual(j["state"], "CANCELLED", j)
        # Following a cancelled job's logs exits non-zero, as gcloud's stream-logs does.
        r = self.stoker("jobs", "logs", "hp_slow", "--follow", check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("ended: CANCELLED", r.stderr)
        status, body = self.api("POST", "/v1/projects/p/jobs/absent:cancel", {})
        self.assertEqual(status, 404, body)
        r = self.stoker("jobs", "describe", "absent", check=False)
        self.assertEqual(r.returncode, 3, r.stderr)


class FollowTest(StokerTestCase):
    config = StokerTestCase.config + """
inventory:
  cpus: 4
  memory_gb: 16
  gpus: [{type: NVIDIA_TESLA_T4}]
"""

    def test_follow_exits_by_the_end_state(self):
        ok = self.submit(container_job("ok", "echo fine"))
        bad = self.submit(container_job("bad", "echo oops; exit 3"))
        r = self.stoker("jobs", "logs", ok, "--follow", check=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("fine", r.stdout)
        r = self.stoker("jobs", "logs", bad, "--follow", check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("oops", r.stdout)
        self.assertIn("ended: JOB_STATE_FAILED", r.stderr)
        # Without --follow it only prints what there is.
        self.assertEqual(self.stoker("jobs", "logs", bad, check=False).returncode, 0)

    def test_follow_says_what_a_queued_job_waits_for(self):
        gate = os.path.join(self.tmp, "gate")
        first = self.submit(container_job(
            "holder", "while [ ! -e %s ]; do sleep 0.05; done" % gate,
            accelerator=("NVIDIA_TESLA_T4", 1)))
        wait_for(lambda: self.job(first)["state"] == "JOB_STATE_RUNNING", 30, "the holder to run")
        second = self.submit(container_job("waiter", "echo got the gpu",
                                           accelerator=("NVIDIA_TESLA_T4", 1)))
        wait_for(lambda: [e for e in self.api("GET", "/v1/stoker/queue")[1]["jobs"]
                          if e["jobId"] == second], 30, "the waiter in the queue")
        env = dict(os.environ, STOKER_TOKEN=self.daemon.token, STOKER_HOME=os.path.join(self.tmp, "h"))
        env.pop("STOKER_SERVER", None)
        follower = subprocess.Popen(
            [STOKER, "--server", self.daemon.url, "--project", "p", "--region", "l",
             "jobs", "logs", second, "--follow"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        watchdog = threading.Timer(60, follower.kill)  # a hung follower fails, never hangs the suite
        watchdog.start()
        try:
            first_line = follower.stderr.readline()
            self.assertRegex(first_line, r"^Waiting: queued 1st, needs .*NVIDIA_TESLA_T4")
            open(gate, "w").close()
            out, err = follower.communicate(timeout=60)
        finally:
            watchdog.cancel()
            if follower.poll() is None:
                follower.kill()
        self.assertEqual(follower.returncode, 0, err)
        self.assertIn("got the gpu", out)


if __name__ == "__main__":
    unittest.main()
