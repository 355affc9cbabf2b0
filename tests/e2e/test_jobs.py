"""Submitting, running, watching and the trainer's environment."""
import datetime
import json
import os
import re

from harness import IMAGE, StokerTestCase, container_job, read_text, wait_for


class JobsTest(StokerTestCase):
    config = StokerTestCase.config + """
inventory:
  cpus: 8
  memory_gb: 32
  gpus:
    - {type: NVIDIA_TESLA_T4}
    - {type: NVIDIA_TESLA_T4}
"""

    def test_submit_follow_runs_to_success_and_describe_shows_events(self):
        path = self.write("job.yaml", """
displayName: hello
labels: {team: ml}
jobSpec:
  workerPoolSpecs:
  - machineSpec: {machineType: n1-standard-4}
    replicaCount: 1
    containerSpec:
      imageUri: %s
      command: [python3, -c]
      args: ["print('hello from stoker')"]
""" % IMAGE)
        r = self.stoker("jobs", "submit", "--config", path, "--follow")
        self.assertIn("hello from stoker", r.stdout)
        self.assertIn("JOB_STATE_SUCCEEDED", r.stdout)
        job_id = re.search(r"Submitted job (\d+)", r.stdout).group(1)
        d = self.stoker("jobs", "describe", job_id).stdout
        for want in ("JOB_STATE_SUCCEEDED", "QUEUED -> PENDING", "PENDING -> RUNNING",
                     "RUNNING -> SUCCEEDED", "submitted"):
            self.assertIn(want, d)
        j = json.loads(self.stoker("--format", "json", "jobs", "describe", job_id).stdout)
        self.assertEqual(j["labels"], {"team": "ml"})
        self.assertEqual(j["jobSpec"]["workerPoolSpecs"][0]["replicaCount"], "1")
        for t in ("createTime", "startTime", "endTime", "updateTime"):
            self.assertRegex(j[t], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
        listing = self.stoker("jobs", "list").stdout
        self.assertRegex(listing, r"%s\s+hello\s+JOB_STATE_SUCCEEDED" % job_id)

    def test_trainer_sees_the_vertex_environment(self):
        self.stoker("storage", "mb", "gs://data")
        self.stoker("storage", "mb", "gs://out")
        job = container_job(
            "env", "env > env.txt; echo \"$@\" > args.txt",
            env=[("A", "one"), ("B", "$(A)-two"), ("DATA", "gs://data/x.csv"),
                 ("KEEP", "$$(A)"), ("JOB", "$(CLOUD_ML_JOB_ID)")],
            accelerator=("NVIDIA_TESLA_T4", 1))
        pool = job["jobSpec"]["workerPoolSpecs"][0]
        pool["containerSpec"]["command"] = ["/bin/sh", "-c", "env > env.txt; echo \"$@\" > args.txt", "sh"]
        pool["containerSpec"]["args"] = ["--train=gs://data/train", "--model=$(AIP_MODEL_DIR)"]
        job["jobSpec"]["baseOutputDirectory"] = {"outputUriPrefix": "gs://out/run1"}
        job_id = self.submit(job)
        self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")
        rdir = self.replica_dir(job_id)
        env = dict(line.split("=", 1) for line in read_text(os.path.join(rdir, "work", "env.txt")).splitlines()
                   if "=" in line)
        out = os.path.join(self.data, "buckets", "out", "run1")
        self.assertEqual(env["AIP_MODEL_DIR"], out + "/model/")
        self.assertEqual(env["AIP_CHECKPOINT_DIR"], out + "/checkpoints/")
        self.assertEqual(env["AIP_TENSORBOARD_LOG_DIR"], out + "/logs/")
        self.assertEqual(env["CLOUD_ML_JOB_ID"], job_id)
        self.assertEqual(env["CUDA_VISIBLE_DEVICES"], "0")
        self.assertEqual(env["CLOUD_ML_HP_METRIC_FILE"], os.path.join(rdir, "hypertune", "output.metrics"))
        self.assertEqual(env["B"], "one-two")
        self.assertEqual(env["KEEP"], "$(A)")
        self.assertEqual(env["JOB"], job_id)
        self.assertEqual(env["DATA"], os.path.join(self.data, "buckets", "data", "x.csv"))
        cluster = json.loads(env["CLUSTER_SPEC"])
        self.assertEqual(cluster["task"], {"type": "workerpool0", "index": 0})
        self.assertEqual(len(cluster["cluster"]["workerpool0"]), 1)
        tf = json.loads(env["TF_CONFIG"])
        self.assertEqual(tf["task"]["type"], "chief")
        self.assertEqual((env["RANK"], env["WORLD_SIZE"]), ("0", "1"))
        args = read_text(os.path.join(rdir, "work", "args.txt")).split()
        self.assertEqual(args, ["--train=" + os.path.join(self.data, "buckets", "data", "train"),
                                "--model=" + out + "/model/"])
        self.assertNotIn("STOKER_SERVER", env)

    def test_logs_follow_streams_while_running_and_filters_replicas(self):
        worker = {"machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 2,
                  "containerSpec": {"imageUri": IMAGE,
                                    "command": ["/bin/sh", "-c", "echo worker $RANK; sleep 0.3"]}}
        job_id = self.submit(container_job(
            "logs", "for i in 1 2 3; do echo line $i; sleep 0.3; done", pools=[worker]))
        follow = self.stoker("jobs", "logs", job_id, "--follow").stdout
        self.assertIn("workerpool0-0: line 3", follow)
        self.assertIn("workerpool1-0: worker 1", follow)
        self.assertIn("workerpool1-1: worker 2", follow)
        self.assertEqual(self.job(job_id)["state"], "JOB_STATE_SUCCEEDED")
        only = self.stoker("jobs", "logs", job_id, "--replica", "workerpool1-1").stdout
        self.assertEqual(only.strip(), "worker 2")

    def test_logs_arrive_before_the_job_ends(self):
        marker = os.path.join(self.tmp, "release")
        job_id = self.submit(container_job(
            "stream", "echo first; while [ ! -e %s ]; do sleep 0.05; done; echo second" % marker))
        import subprocess
        proc = subprocess.Popen(
            ["stoker" if False else os.path.join(os.environ.get("STOKER_BIN_DIR", ""), "stoker"),
             "--server", self.daemon.url, "--project", "p", "--region", "l", "jobs", "logs", job_id,
             "--follow"], stdout=subprocess.PIPE, text=True,
            env=dict(os.environ, STOKER_TOKEN=self.daemon.token))
        first = proc.stdout.readline()
        self.assertEqual(first.strip(), "first")
        self.assertIsNone(proc.poll(), "logs --follow returned before the job ended")
        open(marker, "w").close()
        rest = proc.stdout.read()
        self.assertEqual(proc.wait(timeout=60), 0)
        self.assertIn("second", rest)

    def test_logs_timestamps_date_each_line_when_it_was_written(self):
        worker = {"machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 1,
                  "containerSpec": {"imageUri": IMAGE,
                                    "command": ["/bin/sh", "-c", "echo worker"]}}
        job_id = self.submit(container_job("stamped", "echo first; sleep 1.2; echo second",
                                           pools=[worker]))
        stamped = self.stoker("jobs", "logs", job_id, "--follow", "--timestamps").stdout
        line = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z (\S+): (.*)$")
        times = {}
        for text in stamped.splitlines():
            m = line.match(text)
            self.assertIsNotNone(m, "not 'TIME REPLICA: LINE': %r in %r" % (text, stamped))
            times[(m.group(2), m.group(3))] = datetime.datetime.strptime(
                m.group(1) + "+0000", "%Y-%m-%dT%H:%M:%S.%f%z")
        self.assertEqual(sorted(times), [("workerpool0-0", "first"), ("workerpool0-0", "second"),
                                         ("workerpool1-0", "worker")])
        gap = (times[("workerpool0-0", "second")] -
               times[("workerpool0-0", "first")]).total_seconds()
        self.assertGreaterEqual(gap, 1.15, stamped)
        self.assertLess(gap, 5, stamped)
        now = datetime.datetime.now(datetime.timezone.utc)
        self.assertLess(abs((now - times[("workerpool0-0", "first")]).total_seconds()), 120)
        # Without the flag, the output is what it always was.
        plain = self.stoker("jobs", "logs", job_id).stdout
        self.assertEqual(plain, "workerpool0-0: first\nworkerpool0-0: second\n"
                                "workerpool1-0: worker\n")
        # gcloud's command line takes it too; one replica: no name after the time.
        one = self.stoker("ai", "custom-jobs", "stream-logs", job_id, "--task-name",
                          "workerpool0-0", "--timestamps").stdout.splitlines()
        self.assertEqual([t[25:] for t in one], ["first", "second"])
        self.assertEqual([t[:24] for t in one],
                         [line.match(t).group(1) + "Z" for t in stamped.splitlines()
                          if t.endswith(("first", "second"))])

    def test_rest_api_lists_gets_and_filters_jobs(self):
        a = self.submit(container_job("a", "true"))
        b = self.submit(container_job("b", "exit 1"))
        self.wait_state(a)
        self.wait_state(b)
        status, body = self.api("GET", self.project_path)
        self.assertEqual(status, 200)
        self.assertEqual([j["displayName"] for j in body["customJobs"]], ["a", "b"])
        status, body = self.api("GET", self.project_path + '?filter=state%3D%22JOB_STATE_FAILED%22')
        self.assertEqual([j["displayName"] for j in body["customJobs"]], ["b"])
        status, body = self.api("GET", self.project_path + "?pageSize=1")
        self.assertEqual(len(body["customJobs"]), 1)
        status, page2 = self.api("GET", self.project_path + "?pageSize=1&pageToken=" + body["nextPageToken"])
        self.assertEqual(page2["customJobs"][0]["displayName"], "b")
        status, body = self.api("GET", self.project_path + "/999")
        self.assertEqual(status, 404)
        self.assertEqual(body["error"]["status"], "NOT_FOUND")
        # Other project and location names work the same.
        status, body = self.api("GET", "/v1/projects/other/locations/europe-west4/customJobs/" + a)
        self.assertEqual(status, 200)

    def test_args_flag_replaces_every_pools_args(self):
        path = self.write("job.json", json.dumps(container_job("args", 'echo "$@"')))
        job = json.loads(read_text(path))
        job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["command"].append("sh")
        job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"] = ["--old"]
        open(path, "w").write(json.dumps(job))
        r = self.stoker("jobs", "submit", "--config", path, "--args=--epochs=3,--lr=0.1", "--follow")
        self.assertIn("--epochs=3 --lr=0.1", r.stdout)
        self.assertNotIn("--old", r.stdout)

    def test_bare_job_spec_needs_a_display_name_flag(self):
        spec = container_job("x", "echo bare")["jobSpec"]
        path = self.write("spec.yaml", json.dumps(spec))
        r = self.stoker("jobs", "submit", "--config", path, check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--display-name", r.stderr)
        r = self.stoker("jobs", "submit", "--config", path, "--display-name", "bare", "--follow")
        self.assertIn("echo bare".split()[1], r.stdout)

    def test_describe_json_resubmits_to_the_same_spec(self):
        self.stoker("storage", "mb", "gs://rtb")
        job = container_job("roundtrip", "true", env=[("A", "1")], timeout="120s",
                            accelerator=("NVIDIA_TESLA_T4", 1))
        job["labels"] = {"team": "ml"}
        job["jobSpec"]["baseOutputDirectory"] = {"outputUriPrefix": "gs://rtb/out/"}
        job["jobSpec"]["network"] = "projects/1/global/networks/n"
        first = self.submit(job)
        described = self.stoker("--format", "json", "jobs", "describe", first).stdout
        path = self.write("described.json", described)
        r = self.stoker("--format", "json", "jobs", "submit", "--config", path)
        second = json.loads(r.stdout)
        original = json.loads(described)
        for key in ("displayName", "labels", "jobSpec"):
            self.assertEqual(second[key], original[key], key)
        # The field Stoker cannot honour is named in a warning event.
        events = self.api("GET", self.project_path + "/" + first + "/events")[1]["events"]
        self.assertTrue(any("jobSpec.network" in e["reason"] and "no effect" in e["reason"] for e in events))

    def test_nfs_mounts_whose_path_exists_appear_under_mnt_nfs(self):
        share = os.path.join(self.tmp, "share")
        os.makedirs(share)
        open(os.path.join(share, "hello.txt"), "w").write("from nfs")
        point = "stoker-e2e-%d" % os.getpid()
        job = container_job("nfs", "cat /mnt/nfs/%s/hello.txt" % point)
        job["jobSpec"]["workerPoolSpecs"][0]["nfsMounts"] = [
            {"server": "10.0.0.2", "path": share, "mountPoint": point},
            {"server": "10.0.0.2", "path": "/no/such/export", "mountPoint": point + "-missing"}]
        try:
            job_id = self.submit(job)
            self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")
            self.assertIn("from nfs", self.stoker("jobs", "logs", job_id).stdout)
            d = self.stoker("jobs", "describe", job_id).stdout
            self.assertIn("nfsMounts[1] not mounted", d)
        finally:
            if os.path.islink("/mnt/nfs/" + point):
                os.unlink("/mnt/nfs/" + point)
