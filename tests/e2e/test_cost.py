"""What every job costs (issue #18): the usage ledger, cloud-equivalent and
own-hardware prices on jobs and studies, `stoker usage` reports, `stoker cost
estimate`, budgets that warn, refuse and stop, and buy vs rent -- against the
real daemon and CLI."""
import csv
import io
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request

from harness import (IMAGE, STOKER, Daemon, StokerTestCase, container_job, stokerd_refuses,
                     wait_for)

# Vertex list prices (docs/prices.md): n1-standard-4 $0.21849885/h, one T4 $0.4025/h.
N1_4_T4_VERTEX = 0.21849885 + 0.4025
N1_4_T4_CE = 0.19 + 0.35


class CostTest(StokerTestCase):
    config = StokerTestCase.config + """
inventory: {cpus: 16, memory_gb: 64, gpus: [{type: NVIDIA_TESLA_T4, memory_gb: 16}]}
cost:
  own_hardware:
    usd_per_kwh: 0.10
    gpus: {NVIDIA_TESLA_T4: {purchase_usd: 2000, life_years: 2, watts: 70}}
    node: {purchase_usd: 4000, life_years: 4, watts: 100}
"""

    def gpu_job(self, name, script, machine="n1-standard-4"):
        return container_job(name, script, machine=machine, accelerator=("NVIDIA_TESLA_T4", 1))

    def events(self, job_id):
        return [e["reason"] for e in
                self.api("GET", self.project_path + "/" + job_id + "/events")[1]["events"]]

    def me(self):
        return self.api("GET", "/v1/whoami")[1]["user"]

    def test_a_finished_job_shows_what_it_used_and_what_it_cost(self):
        job_id = self.submit(self.gpu_job("priced", "sleep 1.5"))
        self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")
        usage = self.job(job_id)["stoker"]["usage"]
        hours = usage["replicaHours"]
        self.assertGreater(hours * 3600, 1.4)
        self.assertLess(hours * 3600, 10)
        self.assertAlmostEqual(usage["gpuHours"], hours, places=9)
        self.assertAlmostEqual(usage["gpuHoursByType"]["NVIDIA_TESLA_T4"], hours, places=9)
        self.assertAlmostEqual(usage["vcpuHours"], 4 * hours, places=9)  # n1-standard-4
        self.assertAlmostEqual(usage["usd"]["vertex"] / hours, N1_4_T4_VERTEX, places=6)
        self.assertAlmostEqual(usage["usd"]["compute-engine"] / hours, N1_4_T4_CE, places=3)
        # Own: the T4 ($2000 over 2 years + 70 W at $0.10/kWh) and 4 of 16 CPUs of the
        # node ($4000 over 4 years + 100 W).
        own_rate = (2000 / (2 * 8766) + 0.07 * 0.10) + 0.25 * (4000 / (4 * 8766) + 0.1 * 0.10)
        self.assertAlmostEqual(usage["usd"]["own"] / hours, own_rate, places=6)
        text = self.stoker("jobs", "describe", job_id).stdout
        self.assertIn("usage:", text)
        m = re.search(r"cost:     Vertex \$([\d.]+), Compute Engine \$([\d.]+), "
                      r"Spot \$([\d.]+), own hardware \$([\d.]+)", text)
        self.assertIsNotNone(m, text)
        # A job of seconds costs a fraction of a cent: shown to three
        # significant digits (it once read $0.00 for every short job).
        for shown, key in zip(m.groups(), ("vertex", "compute-engine", "spot", "own")):
            self.assertAlmostEqual(float(shown) / usage["usd"][key], 1, delta=0.006, msg=text)

    def test_the_ledger_is_exact_across_a_daemon_killed_while_the_job_ran(self):
        job_id = self.submit(self.gpu_job("survivor", "sleep 2"))
        wait_for(lambda: self.job(job_id)["state"] == "JOB_STATE_RUNNING", 30, "the job to run")
        self.daemon.kill(signal.SIGKILL)
        time.sleep(4)  # the job ends while no daemon watches
        self.daemon = Daemon(self.data, self.config).start()
        self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")
        seconds = self.job(job_id)["stoker"]["usage"]["replicaHours"] * 3600
        # The supervisor's own start and end: about 2 s, not the 4 s the daemon was away.
        self.assertGreater(seconds, 1.9)
        self.assertLess(seconds, 3.5)

    def test_usage_reports_group_and_print_csv_and_json(self):
        a = self.submit(self.gpu_job("a", "sleep 0.5"))
        b = self.submit(dict(container_job("b", "sleep 0.5", machine="n1-standard-4"),
                             labels={"team": "nlp"}))
        for j in (a, b):
            self.assertEqual(self.wait_state(j)["state"], "JOB_STATE_SUCCEEDED")
        report = json.loads(self.stoker("--format", "json", "usage", "--by", "job").stdout)
        keys = {g["key"]: g for g in report["groups"]}
        self.assertEqual(set(keys), {a, b})
        self.assertGreater(keys[a]["gpuHours"], 0)
        self.assertEqual(keys[b]["gpuHours"], 0)
        self.assertEqual(report["total"]["jobs"], 2)
        self.assertAlmostEqual(report["total"]["usd"]["vertex"],
                               keys[a]["usd"]["vertex"] + keys[b]["usd"]["vertex"], places=9)
        by_label = json.loads(self.stoker("usage", "--by", "label:team", "--format", "json").stdout)
        self.assertEqual({g["key"] for g in by_label["groups"]}, {"nlp", "(unlabelled)"})
        rows = list(csv.reader(io.StringIO(
            self.stoker("usage", "--by", "user", "--days", "1", "--format", "csv").stdout)))
        self.assertEqual(rows[0], ["user", "JOBS", "GPU_H", "IDLE_GPU_H", "VCPU_H", "GB_H", "VERTEX",
                                   "COMPUTE_ENGINE", "SPOT", "OWN"])
        self.assertEqual(rows[1][0], self.me())
        self.assertEqual(rows[1][1], "2")
        text = self.stoker("usage").stdout
        self.assertIn("TOTAL", text)
        self.assertIn("list prices of 2026-07-30", text)
        bad = self.stoker("usage", "--by", "colour", check=False)
        self.assertEqual(bad.returncode, 2, bad.stderr)
        self.assertIn("groupBy: 'colour'", bad.stderr)
        bad = self.stoker("jobs", "list", "--format", "csv", check=False)
        self.assertEqual(bad.returncode, 2)  # gcloud's csv needs its keys; usage has its own
        self.assertIn("--format: csv needs the keys to print, e.g. csv(", bad.stderr)

    def test_a_study_shows_each_trials_cost_and_the_total(self):
        study = {
            "displayName": "priced-study", "maxTrialCount": 2, "parallelTrialCount": 2,
            "studySpec": {"metrics": [{"metricId": "loss", "goal": "MINIMIZE"}],
                          "parameters": [{"parameterId": "x",
                                          "doubleValueSpec": {"minValue": 0, "maxValue": 1}}]},
            "trialJobSpec": {"workerPoolSpecs": [{
                "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
                "containerSpec": {"imageUri": IMAGE, "command": ["/bin/sh", "-c", "sleep 0.5"]}}]}}
        status, body = self.api("POST", "/v1/projects/p/locations/l/hyperparameterTuningJobs", study)
        self.assertEqual(status, 200, body)
        sid = body["name"].rsplit("/", 1)[1]
        path = "/v1/projects/p/locations/l/hyperparameterTuningJobs/" + sid
        done = wait_for(lambda: (lambda s: s if s["state"] in (
            "JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED") else None)(self.api("GET", path)[1]), 60,
            "the study to end")
        trials = [t["stoker"]["usage"]["usd"]["vertex"] for t in done["trials"]]
        self.assertEqual(len(trials), 2)
        self.assertTrue(all(v > 0 for v in trials), trials)
        self.assertAlmostEqual(done["stoker"]["usage"]["usd"]["vertex"], sum(trials), places=9)
        text = self.stoker("hptuning", "describe", sid).stdout
        self.assertIn("VERTEX$", text)
        self.assertIn("cost:     Vertex $", text)

    def test_cost_estimate_prices_a_job_file_before_it_runs(self):
        config = self.write("job.yaml", """
workerPoolSpecs:
  - machineSpec: {machineType: n1-standard-8, acceleratorType: NVIDIA_TESLA_T4, acceleratorCount: 1}
    replicaCount: 1
    containerSpec: {imageUri: %s}
  - machineSpec: {machineType: n1-standard-8, acceleratorType: NVIDIA_TESLA_T4, acceleratorCount: 1}
    replicaCount: 1
    containerSpec: {imageUri: %s}
scheduling: {timeout: 7200s}
""" % (IMAGE, IMAGE))
        out = json.loads(self.stoker("--format", "json", "cost", "estimate", "--config",
                                     config).stdout)
        # Two replicas of n1-standard-8 ($0.4370/h on Vertex, est.) + a T4 ($0.4025/h).
        self.assertAlmostEqual(out["usdPerHour"]["vertex"], 2 * (0.4370 + 0.4025), places=3)
        self.assertAlmostEqual(out["usdAtTimeout"]["vertex"], 2 * 2 * (0.4370 + 0.4025), places=3)
        self.assertEqual(out["timeoutHours"], 2)
        text = self.stoker("cost", "estimate", "--config", config).stdout
        self.assertIn("n1-standard-8 + 1 x NVIDIA_TESLA_T4", text)
        self.assertIn("If it runs to its timeout (2 h)", text)

        h100 = self.write("h100.yaml", """
workerPoolSpecs:
  - machineSpec: {machineType: n1-standard-8, acceleratorType: NVIDIA_H100_80GB, acceleratorCount: 1}
    replicaCount: 1
    containerSpec: {imageUri: %s}
""" % IMAGE)
        out = json.loads(self.stoker("--format", "json", "cost", "estimate", "--config",
                                     h100).stdout)
        self.assertIsNone(out["usdPerHour"]["vertex"])  # no price, never a wrong one
        self.assertIn("a3-highgpu", out["pools"][0]["noPrice"])
        # An AI Platform job file (gcloud ai-platform jobs submit training
        # --config), bare or as a Job, scale tier and legacy names included:
        # BASIC_GPU is one n1-standard-8 with a K80, standard_gpu the same.
        for name, text in (("tier.yaml", "trainingInput:\n  scaleTier: BASIC_GPU\n"),
                           ("bare.yaml", "scaleTier: CUSTOM\nmasterType: standard_gpu\n")):
            out = json.loads(self.stoker("--format", "json", "cost", "estimate", "--config",
                                         self.write(name, text)).stdout)
            self.assertEqual(len(out["pools"]), 1, out)
            self.assertIn("NVIDIA_TESLA_K80", out["pools"][0]["basis"], out)
            self.assertGreater(out["usdPerHour"]["vertex"], 0.5, out)
        bad = self.write("bad.yaml", "workerPoolSpecs: [{replicaCount: 1}]\n")
        r = self.stoker("cost", "estimate", "--config", bad, check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("machineSpec", r.stderr)

    def estimate_in(self, region, config, *args, check=True):
        """`stoker cost estimate` with the global --region set to `region` (self.stoker
        sets it to the test's location, l)."""
        env = dict(os.environ, STOKER_TOKEN=self.daemon.token,
                   STOKER_HOME=os.path.join(self.tmp, "no-home"))
        env.pop("STOKER_SERVER", None)
        r = subprocess.run([STOKER, "--server", self.daemon.url, "--project", "p", "--region",
                            region] + list(args) + ["cost", "estimate", "--config", config],
                           capture_output=True, text=True, env=env, timeout=120)
        if check:
            self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def test_cost_estimate_prices_in_the_region_asked(self):
        # The Asia-Pacific BASIC_GPU: one n1-standard-8 with a K80, priced in
        # asia-east1 (trainingInput.region) from S1's asia-east1 row ($0.439996/h), the
        # K80 at the 2019 Americas $0.45 x AI Platform's $0.54 / $0.49, and training
        # units at $0.54, the Europe and Asia-Pacific rate.
        tier = self.write("asia.yaml", "trainingInput:\n  scaleTier: BASIC_GPU\n"
                                       "  region: asia-east1\n")
        out = json.loads(self.stoker("--format", "json", "cost", "estimate", "--config",
                                     tier).stdout)
        ce = 0.439996 + 0.45 * 0.54 / 0.49
        self.assertEqual(out["catalog"]["region"], "asia-east1", out)
        self.assertEqual(out["catalog"]["usdPerTrainingUnit"], 0.54, out)
        self.assertAlmostEqual(out["usdPerHour"]["compute-engine"], ce, places=9)
        self.assertIn("NVIDIA_TESLA_K80", out["pools"][0]["basis"], out)
        text = self.stoker("cost", "estimate", "--config", tier).stdout
        self.assertIn("AI Platform training units: %.4f per hour" % (ce / 0.54), text)
        self.assertIn("at $0.54 per unit, the Europe and Asia-Pacific rate", text)
        self.assertIn("prices: asia-east1 list prices", text)
        # S2 has no K80; the GPUs it lists are priced per region from its rows: a T4 in
        # asia-east1 ",,,T4,1,...,asia-east1,asia-east1-a,0.35,0.14", AI Platform's
        # standard_v100 (n1-standard-8 + 1 V100) ",,,V100,1,...,asia-east1-c,2.48,0.8792".
        t4 = self.write("t4.yaml", "workerPoolSpecs:\n  - machineSpec: {machineType: "
                        "n1-standard-8, acceleratorType: NVIDIA_TESLA_T4, acceleratorCount: 1}\n"
                        "    replicaCount: 1\n    containerSpec: {imageUri: %s}\n" % IMAGE)
        out = json.loads(self.estimate_in("asia-east1", t4, "--format", "json").stdout)
        self.assertAlmostEqual(out["usdPerHour"]["compute-engine"], 0.439996 + 0.35, places=9)
        self.assertAlmostEqual(out["usdPerHour"]["spot"], 0.08608 + 0.14, places=9)
        v100 = self.write("v100.yaml", "trainingInput:\n  scaleTier: CUSTOM\n"
                                       "  masterType: standard_v100\n  region: asia-east1\n")
        out = json.loads(self.stoker("--format", "json", "cost", "estimate", "--config",
                                     v100).stdout)
        self.assertAlmostEqual(out["usdPerHour"]["compute-engine"], 0.439996 + 2.48, places=9)
        # S2 lists no V100 in europe-west2: no price there, and why.
        out = json.loads(self.estimate_in("europe-west2", v100, "--format", "json").stdout)
        self.assertIsNone(out["usdPerHour"]["compute-engine"], out)
        self.assertIn("NVIDIA_TESLA_V100 is not sold in europe-west2", json.dumps(out["pools"]))
        # --region wins over the file's; without either, the config's cost.region.
        out = json.loads(self.estimate_in("us-east1", tier, "--format", "json").stdout)
        self.assertEqual(out["catalog"]["usdPerTrainingUnit"], 0.49, out)
        self.assertAlmostEqual(out["usdPerHour"]["compute-engine"], 0.379998 + 0.45, places=9)
        plain = self.write("plain.yaml", "workerPoolSpecs:\n  - machineSpec: {machineType: "
                           "n1-standard-4}\n    replicaCount: 1\n    containerSpec: {imageUri: "
                           "%s}\n" % IMAGE)
        out = json.loads(self.stoker("--format", "json", "cost", "estimate", "--config",
                                     plain).stdout)
        self.assertEqual(out["catalog"]["region"], "us-central1", out)
        self.assertAlmostEqual(out["usdPerHour"]["compute-engine"], 0.19, places=9)
        out = json.loads(self.estimate_in("europe-west4", plain, "--format", "json").stdout)
        self.assertAlmostEqual(out["usdPerHour"]["compute-engine"], 0.209168, places=9)
        # A region the catalog does not price is an error, never us-central1's prices.
        r = self.estimate_in("asia-pacific", plain, check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("region: no prices for 'asia-pacific'; known: asia-east1,", r.stderr)

    def test_a_jobs_location_chooses_its_prices(self):
        self.project_path = "/v1/projects/p/locations/europe-west4/customJobs"
        job_id = self.submit(container_job("eu", "sleep 1", machine="n1-standard-4"))
        self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")
        usage = self.job(job_id)["stoker"]["usage"]
        hours = usage["replicaHours"]
        self.assertGreater(hours, 0)
        # S1's europe-west4 n1-standard-4: $0.209168/h (us-central1: $0.19).
        self.assertAlmostEqual(usage["usd"]["compute-engine"] / hours, 0.209168, places=6)
        # The ledger keeps the job's location: `stoker usage` prices the row there too,
        # not in cost.region (us-central1).
        report = json.loads(self.stoker("--format", "json", "usage", "--by", "job").stdout)
        row = {g["key"]: g for g in report["groups"]}[job_id]
        self.assertAlmostEqual(row["usd"]["compute-engine"] / row["replicaHours"], 0.209168,
                               places=6)
        self.assertEqual(report["catalog"]["region"], "us-central1", report)
        self.assertEqual(report["catalog"]["regions"], ["europe-west4"], report)
        self.assertNotIn("before Stoker kept", json.dumps(report), report)
        self.assertIn("prices: europe-west4 list prices of", self.stoker("usage").stdout)
        # A location that names a region the catalog lacks gets no price, with why.
        self.project_path = "/v1/projects/p/locations/mars-north1/customJobs"
        job_id = self.submit(container_job("mars", "true", machine="n1-standard-4"))
        self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")
        usage = self.job(job_id)["stoker"]["usage"]
        self.assertIsNone(usage["usd"]["compute-engine"], usage)
        self.assertIn("no prices for 'mars-north1'", json.dumps(usage["noPrice"]))

    def test_budgets_warn_refuse_new_jobs_and_stop_running_ones(self):
        me = self.me()
        running = self.submit(self.gpu_job("long", "sleep 120"))
        wait_for(lambda: self.job(running)["state"] == "JOB_STATE_RUNNING", 30, "the job to run")
        time.sleep(1.5)  # over a thousandth of a GPU-hour
        # A budget without stopRunning only refuses new jobs.
        r = self.stoker("budgets", "set", "user:" + me, "--monthly-gpu-hours", "0.0003")
        self.assertIn("Budget set: user:%s" % me, r.stdout)
        refused = self.stoker("jobs", "submit", "--config",
                              self.write("j.json", json.dumps(container_job("new", "true"))),
                              check=False)
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("budget user:%s:" % me, refused.stderr)
        self.assertIn("GPU-hours used in", refused.stderr)
        self.assertIn("stoker budgets set user:" + me, refused.stderr)
        self.assertEqual(self.job(running)["state"], "JOB_STATE_RUNNING")
        listed = self.stoker("budgets", "list").stdout
        self.assertIn("EXCEEDED", listed)
        self.assertIn("refuse new", listed)
        # With --stop-running the hard limit cancels the scope's running job.
        self.stoker("budgets", "set", "user:" + me, "--monthly-gpu-hours", "0.0003",
                    "--stop-running")
        final = self.wait_state(running, timeout=40)
        self.assertEqual(final["state"], "JOB_STATE_CANCELLED")
        self.assertTrue(any("its hard limit stops the scope's jobs" in e
                            for e in self.events(running)), self.events(running))
        # A soft limit: past warnAt, a new job is admitted with a warning event.
        self.stoker("budgets", "set", "user:" + me, "--monthly-gpu-hours", "1", "--warn-at",
                    "0.0001")
        warned = self.submit(container_job("warned", "true"))
        self.assertTrue(any(e.startswith("warning: budget user:") for e in self.events(warned)),
                        self.events(warned))
        # Bad input names the field; only admins change budgets.
        bad = self.stoker("budgets", "set", "team:x", "--monthly-usd", "5", check=False)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("user:NAME, project:NAME or label:KEY=VALUE", bad.stderr)
        self.stoker("admin", "users", "add", "user1", "--role", "user")
        token = self.stoker("admin", "users", "token", "user1").stdout.strip()
        denied = self.stoker("budgets", "set", "user:user1", "--monthly-usd", "5", check=False,
                             env={"STOKER_TOKEN": token})
        self.assertNotEqual(denied.returncode, 0)
        self.assertIn("only admins", denied.stderr)
        self.stoker("budgets", "delete", "user:" + me)
        self.assertIn("No budgets", self.stoker("budgets", "list").stdout)
        self.submit(container_job("after", "true"))

    def test_break_even_answers_from_real_usage(self):
        job_id = self.submit(self.gpu_job("work", "sleep 1"))
        self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")
        out = json.loads(self.stoker("--format", "json", "usage", "--break-even", "--days",
                                     "1").stdout)
        self.assertEqual(out["jobs"], 1)
        self.assertEqual(out["gpuCapacityHours"], 24)
        self.assertEqual(out["purchaseUsd"], 6000)
        # Fixed per month: 2000/24 + 4000/48 amortised + 100 W × 730.5 h × $0.10/kWh.
        self.assertAlmostEqual(out["fixedUsdPerMonth"], 2000 / 24 + 4000 / 48 + 7.305, places=6)
        self.assertEqual(out["colabFreeTierJobs"], 1)  # one T4, one replica, under 12 h
        self.assertIsNotNone(out["breakEvenUtilisation"])
        text = self.stoker("usage", "--break-even", "--days", "1").stdout
        self.assertIn("owning pays off above:", text)
        self.assertIn("pays for itself in:", text)
        if out["paybackMonths"] is not None:
            self.assertIn("months at this rate (by 20", text)


    def test_an_ai_platform_job_reports_consumed_ml_units(self):
        ti = {"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "region": "us-central1",
              "masterConfig": {"imageUri": IMAGE, "containerCommand": ["/bin/sh", "-c", "sleep 1"]}}
        status, body = self.api("POST", "/v1/projects/p/jobs", {"jobId": "legacy_1",
                                                              "trainingInput": ti})
        self.assertEqual(status, 200, body)
        j = wait_for(lambda: (lambda j: j if j["state"] == "SUCCEEDED" else None)(
            self.api("GET", "/v1/projects/p/jobs/legacy_1")[1]), 60, "legacy_1 to succeed")
        hours = json.loads(self.stoker("--format", "json", "usage", "--by", "job").stdout)[
            "total"]["replicaHours"]
        # n1-standard-4 at Compute Engine's $0.19/h, in training units of $0.49.
        self.assertAlmostEqual(j["trainingOutput"]["consumedMLUnits"], hours * 0.19 / 0.49,
                               places=4)
        # In europe-west4: that region's $0.209168/h (S1), in units of $0.54.
        ti["region"] = "europe-west4"
        status, body = self.api("POST", "/v1/projects/p/jobs", {"jobId": "legacy_eu",
                                                              "trainingInput": ti})
        self.assertEqual(status, 200, body)
        j = wait_for(lambda: (lambda j: j if j["state"] == "SUCCEEDED" else None)(
            self.api("GET", "/v1/projects/p/jobs/legacy_eu")[1]), 60, "legacy_eu to succeed")
        groups = json.loads(self.stoker("--format", "json", "usage", "--by", "job").stdout)[
            "groups"]
        eu_hours = sum(g["replicaHours"] for g in groups) - hours
        self.assertGreater(eu_hours, 0)
        self.assertAlmostEqual(j["trainingOutput"]["consumedMLUnits"],
                               eu_hours * 0.209168 / 0.54, places=4)

    def metrics(self, token=None):
        req = urllib.request.Request(self.daemon.url + "/metrics", headers={
            "authorization": "Bearer " + (token or self.daemon.token)})
        with urllib.request.urlopen(req, timeout=30) as r:
            self.assertTrue(r.headers["content-type"].startswith("text/plain; version=0.0.4"))
            return r.read().decode()

    def test_prometheus_metrics_carry_this_months_cost_budgets_and_running_jobs(self):
        done = self.submit(self.gpu_job("done", "sleep 0.5"))
        self.assertEqual(self.wait_state(done)["state"], "JOB_STATE_SUCCEEDED")
        running = self.submit(self.gpu_job("running", "sleep 60"))
        wait_for(lambda: self.job(running)["state"] == "JOB_STATE_RUNNING", 30, "the job to run")
        me = self.me()
        self.stoker("budgets", "set", "user:" + me, "--monthly-usd", "100")

        def vertex_total():
            return json.loads(self.stoker("--format", "json", "usage").stdout)["total"]["usd"][
                "vertex"]
        before = vertex_total()
        text = self.metrics()
        after = vertex_total()  # the running job's cost grows between the reads
        promtool = shutil.which("promtool")
        self.assertIsNotNone(promtool, "promtool (Debian's prometheus) is missing: run "
                                       "scripts/install-deps.sh")
        check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                               text=True)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr + text)
        samples = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, value = line.rsplit(" ", 1)
                samples[key] = float(value)
        scraped = samples['stoker_usage_month_cost_usd{user="%s",price="vertex"}' % me]
        self.assertLessEqual(before, scraped)
        self.assertLessEqual(scraped, after)
        self.assertEqual(samples['stoker_budget_limit{scope="user:%s",unit="usd"}' % me], 100)
        self.assertEqual(samples['stoker_budget_exceeded{scope="user:%s"}' % me], 0)
        self.assertGreater(samples['stoker_running_job_cost_usd{job_id="%s",user="%s",'
                                   'price="vertex"}' % (running, me)], 0)
        self.assertNotIn('job_id="%s"' % done, text)  # nothing per finished job
        self.assertGreater(samples['stoker_usage_month_gpu_seconds{user="%s",gpu_type='
                                   '"NVIDIA_TESLA_T4"}' % me], 0)
        # A user (not a viewer or admin) may not scrape everyone's usage.
        self.stoker("admin", "users", "add", "u1", "--role", "user")
        token = self.stoker("admin", "users", "token", "u1").stdout.strip()
        with self.assertRaises(urllib.error.HTTPError) as denied:
            self.metrics(token)
        self.assertEqual(denied.exception.code, 403)


class CostConfigTest(StokerTestCase):
    def test_a_malformed_cost_section_is_refused_at_start_naming_the_key(self):
        err = stokerd_refuses(os.path.join(self.tmp, "bad"), StokerTestCase.config + """
cost:
  own_hardware:
    gpus: {NVIDIA_TESLA_T4: {purchase_usd: -5}}
""")
        self.assertIn("cost.own_hardware.gpus.NVIDIA_TESLA_T4.purchase_usd", err)
        err = stokerd_refuses(os.path.join(self.tmp, "bad2"), StokerTestCase.config + """
cost: {machines: {n1-standard-4: {vertex_usd: 1}}}
""")
        self.assertIn("cost.machines.n1-standard-4", err)
        self.assertIn("vertex_usd", err)
        err = stokerd_refuses(os.path.join(self.tmp, "bad3"), StokerTestCase.config + """
cost: {region: asia-pacific}
""")
        self.assertIn("cost.region: no prices for 'asia-pacific'; known: asia-east1", err)


FAKE_NVML = os.path.join(os.path.dirname(os.path.abspath(__import__("harness").STOKER)), "..",
                         "src", "resources", "libfake_nvml_for_test.so")


class GpuTelemetryTest(StokerTestCase):
    """GPUs found through NVML (here the fake NVML the unit tests use: an H100
    37% busy at 300 W, and an idle T4) are sampled by each replica's
    supervisor while jobs run: the ledger gets busy GPU time and energy from
    that telemetry, and own hardware pays for measured energy."""
    config = StokerTestCase.config + """
inventory: {cpus: 32, memory_gb: 256}
telemetry_seconds: 0.5
cost:
  own_hardware:
    usd_per_kwh: 0.20
    gpus: {NVIDIA_H100_80GB: {purchase_usd: 30000, life_years: 3, watts: 700}}
"""

    def setUp(self):
        if not os.path.exists(FAKE_NVML):
            self.fail("the fake NVML library is not built: " + FAKE_NVML)
        os.environ["STOKER_NVML_LIBRARY"] = os.path.abspath(FAKE_NVML)
        try:
            super().setUp()
        finally:
            del os.environ["STOKER_NVML_LIBRARY"]

    def test_busy_time_and_energy_are_measured_per_job(self):
        job = container_job("measured", "sleep 4", machine="a3-highgpu-1g",
                            accelerator=("NVIDIA_H100_80GB", 1))
        job_id = self.submit(job)
        self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")
        usage = self.job(job_id)["stoker"]["usage"]
        t = usage["telemetry"]
        self.assertGreater(t["sampledGpuHours"] * 3600, 2)
        self.assertLessEqual(t["sampledGpuHours"], usage["gpuHours"] + 1e-9)
        self.assertAlmostEqual(t["busyGpuHours"] / t["sampledGpuHours"], 0.37, places=6)
        self.assertAlmostEqual(t["idleGpuHours"] / t["sampledGpuHours"], 0.63, places=6)
        watts = t["energyKwh"] * 3.6e6 / (t["sampledGpuHours"] * 3600)
        self.assertAlmostEqual(watts, 300, delta=45)
        # Own hardware: amortisation plus the measured 300 W (not the rated 700 W).
        hours = usage["gpuHours"]
        amortised = 30000 / (3 * 8766) * hours
        measured_power = t["energyKwh"] * (hours / t["sampledGpuHours"]) * 0.20
        self.assertAlmostEqual(usage["usd"]["own"], amortised + measured_power, places=9)
        text = self.stoker("jobs", "describe", job_id).stdout
        self.assertIn("GPUs:     busy 37% of the", text)
        report = self.stoker("usage", "--format", "csv").stdout.splitlines()
        idle = float(report[1].split(",")[3])
        self.assertAlmostEqual(idle, t["idleGpuHours"], places=4)
