"""A FIFO queue that never over-commits GPUs."""
import json
import os

from harness import (DEFAULT_CONFIG, IMAGE, StokerTestCase, container_job, read_text,
                     stokerd_refuses, wait_for)


class QueueTest(StokerTestCase):
    config = StokerTestCase.config + """
inventory:
  cpus: 4
  memory_gb: 16
  gpus: [{type: NVIDIA_TESLA_T4}, {type: NVIDIA_TESLA_T4}]
"""

    def test_jobs_start_in_submission_order_and_never_share_a_gpu(self):
        log = os.path.join(self.tmp, "gpu.log")
        script = ("echo start $CUDA_VISIBLE_DEVICES $(date +%%s%%N) %s >> %s; sleep 0.3; "
                  "echo end $CUDA_VISIBLE_DEVICES $(date +%%s%%N) %s >> %s")
        ids = []
        sizes = [2, 1, 1, 2, 1]
        for i, gpus in enumerate(sizes):
            name = "j%d" % i
            ids.append(self.submit(container_job(name, script % (name, log, name, log),
                                                 accelerator=("NVIDIA_TESLA_T4", gpus))))
        # The second waits while the first holds both GPUs, and says why.
        wait_for(lambda: self.job(ids[0])["state"] == "JOB_STATE_RUNNING", 30, "first job")
        status, ev = self.api("GET", self.project_path + "/" + ids[1] + "/events")
        if self.job(ids[1])["state"] == "JOB_STATE_QUEUED":
            self.assertIn("NVIDIA_TESLA_T4", ev["waitReason"])
        for job_id in ids:
            self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")
        # Replay the record: no GPU ever held by two jobs, starts in submission order.
        holders = {}
        starts = []
        for line in read_text(log).splitlines():
            kind, gpus, stamp, name = line.split()
            for g in gpus.split(","):
                if kind == "start":
                    self.assertNotIn(g, holders, "GPU %s double-booked: %s and %s" % (g, holders.get(g), name))
                    holders[g] = name
                else:
                    del holders[g]
            if kind == "start":
                starts.append(name)
        self.assertEqual(sorted(starts), ["j0", "j1", "j2", "j3", "j4"])
        # Placement follows submission order (jobs placed in one pass may
        # start their trainers in any order, so compare the placement events).
        placed = []
        for job_id in ids:
            events = self.api("GET", self.project_path + "/" + job_id + "/events")[1]["events"]
            placed.append([e["time"] for e in events if e["to"] == "JOB_STATE_PENDING"][0])
        self.assertEqual(placed, sorted(placed))
        # Gangs: a job's replicas are allocated together.
        ev = self.api("GET", self.project_path + "/" + ids[0] + "/events")[1]
        self.assertEqual(len(ev["allocation"]["replicas"][0]["gpus"]), 2)

    def test_estimated_start_comes_from_past_runs_never_from_the_timeout(self):
        # The bug: a job that ran seconds, with the 7-day default timeout,
        # made the next one "start in 6d".
        gate = os.path.join(self.tmp, "gate")
        hold = "while [ ! -e %s ]; do sleep 0.05; done" % gate
        both = ("NVIDIA_TESLA_T4", 2)

        def waiter_row(waiter):
            out = self.stoker("queue").stdout
            rows = [l for l in out.splitlines() if l.split()[1:2] == [waiter]]
            return rows[0] if rows else None

        # No history: the estimate is unknown.
        first = self.submit(container_job("holder", hold, accelerator=both))
        wait_for(lambda: self.job(first)["state"] == "JOB_STATE_RUNNING", 30, "the holder to run")
        waiter = self.submit(container_job("waiter", "true", accelerator=both))
        row = wait_for(lambda: waiter_row(waiter), 30, "the waiter in the queue")
        self.assertIn("unknown", row)
        self.assertNotRegex(row, r"in \d+d")
        open(gate, "w").close()
        for job_id in (first, waiter):
            self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")

        # The holder has run once (in about a second): the next wait behind
        # one like it is estimated from that run, not from its 7-day timeout.
        os.unlink(gate)
        second = self.submit(container_job("holder", hold, accelerator=both))
        wait_for(lambda: self.job(second)["state"] == "JOB_STATE_RUNNING", 30, "the holder to run")
        waiter = self.submit(container_job("waiter", "true", accelerator=both))
        row = wait_for(lambda: waiter_row(waiter), 30, "the waiter in the queue")
        self.assertRegex(row, r"\b(now|in \d+(\.\d)?s)\b", row)
        q = json.loads(self.stoker("--format", "json", "queue").stdout)
        entry = [e for e in q["jobs"] if e["jobId"] == waiter][0]
        self.assertIn("estimatedStartTime", entry)
        # Its reason says that start too (it once said the holder's 7-day
        # timeout beside an estimate of seconds); the bound only as such.
        self.assertIn("reserved: expected to start at " + entry["estimatedStartTime"][:19],
                      entry["reason"])
        open(gate, "w").close()
        for job_id in (second, waiter):
            self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")


class LaptopTest(StokerTestCase):
    """The default CPU and memory over-subscription on a small node: a job
    written for cloud-sized replicas still runs on a laptop; machine types
    defined in the config (issue #4)."""
    # The suite's config with the default cpu_oversubscription, on 2 CPUs.
    config = "\n".join(l for l in DEFAULT_CONFIG.splitlines()
                        if not l.startswith("cpu_oversubscription")) + """
inventory: {cpus: 2, memory_gb: 8, gpus: [{type: NVIDIA_TESLA_T4}]}
machine_types:
  lab-box: {vcpus: 1, memory_gb: 3, gpu_type: NVIDIA_TESLA_T4, gpu_count: 1}
"""

    def workers(self, count):
        return [{"machineSpec": {"machineType": "n1-standard-8"}, "replicaCount": count,
                 "containerSpec": {"imageUri": IMAGE, "command": ["/bin/sh", "-c", "true"]}}]

    def test_a_chief_and_two_cloud_sized_workers_run_on_two_cpus(self):
        job_id = self.submit(container_job("three", "true", machine="n1-standard-8",
                                           pools=self.workers(2)))
        job = self.wait_state(job_id)
        self.assertEqual(job["state"], "JOB_STATE_SUCCEEDED", job.get("error"))
        events = self.api("GET", self.project_path + "/" + job_id + "/events")[1]
        reasons = [e["reason"] for e in events["events"]]
        self.assertIn("workerpool1-1: machine type clamped to this node (2 CPUs, 8 GB)", reasons)

    def test_a_gang_beyond_four_nodes_worth_is_refused_with_the_fix(self):
        status, body = self.api("POST", self.project_path,
                                container_job("five", "true", machine="n1-standard-8",
                                              pools=self.workers(4)))
        self.assertEqual(status, 400, body)
        self.assertIn("can never run", body["error"]["message"])
        self.assertIn("cpu_oversubscription", body["error"]["message"])

    def test_a_machine_type_from_the_config_books_its_shape_and_gpus(self):
        job_id = self.submit(container_job("lab", 'echo "gpus=$CUDA_VISIBLE_DEVICES"',
                                           machine="lab-box"))
        job = self.wait_state(job_id)
        self.assertEqual(job["state"], "JOB_STATE_SUCCEEDED", job.get("error"))
        replica = self.api("GET", self.project_path + "/" + job_id + "/events")[1][
            "allocation"]["replicas"][0]
        self.assertEqual((replica["cpus"], replica["memory_bytes"], replica["gpus"]),
                         (1, 3 << 30, [0]))
        self.assertIn("gpus=0", self.stoker("jobs", "logs", job_id).stdout)

    def test_a_bad_machine_type_in_the_config_stops_the_daemon_with_the_key(self):
        stderr = stokerd_refuses(
            os.path.join(self.tmp, "bad"),
            "machine_types:\n  lab-box: {vcpus: 4, gpu_type: NVIDIA_TESLA_T5, gpu_count: 1}\n")
        self.assertIn("machine_types.lab-box.gpu_type", stderr)
        self.assertIn("NVIDIA_TESLA_T4", stderr)  # the fix: a real type
