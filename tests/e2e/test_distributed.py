"""Data-parallel training out of the box (issue #5): the PyTorch DDP example
runs as 1 chief + 2 workers through a real stokerd and CLI, reaches the same
loss as a single replica, every replica sees its rank and the cluster, and a
failing worker fails the job and takes the other replicas down with it."""
import json
import os
import re

from harness import IMAGE, SOURCE, StokerTestCase, container_job, pid_alive, read_text, wait_for

EXAMPLE = os.path.join(SOURCE, "examples", "ddp")

# Same data, seed, initial weights and global batch: the runs differ only in
# the order of float32 additions (gradients averaged over 3 shards instead of
# summed in one batch), measured at ~1e-7 relative on val_loss after 10 epochs.
# 1e-4 relative leaves room for other CPUs/BLAS builds while still failing if
# a replica trained on the wrong shard, batch size or learning rate (those move
# the loss by percents).
REL_TOLERANCE = 1e-4


def env_line(log_text):
    m = re.search(r"^ddp env: (.*)$", log_text, re.M)
    return json.loads(m.group(1)) if m else None


class DistributedTest(StokerTestCase):

    def submit_example(self, job_file, *extra):
        r = self.stoker("jobs", "submit", "--config", os.path.join(EXAMPLE, job_file),
                        "--package-path", os.path.join(EXAMPLE, "trainer"),
                        "--module-name", "trainer.task", *extra)
        return re.search(r"Submitted job (\d+)", r.stdout + r.stderr).group(1)

    def log(self, job_id, replica):
        with open(os.path.join(self.replica_dir(job_id, replica), "output.log")) as f:
            return f.read()

    def metrics(self, output):
        path = os.path.join(self.data, "buckets", "ddp", output, "model", "metrics.json")
        with open(path) as f:
            return json.load(f)

    def test_chief_and_two_workers_match_a_single_replica(self):
        self.stoker("storage", "mb", "gs://ddp")
        # Both at once: 4 trainers share the CPUs, and the test takes half as long.
        ddp = self.submit_example("job.yaml")
        single = self.submit_example("job-single.yaml")
        for job_id in (ddp, single):
            job = self.wait_state(job_id, timeout=150)
            self.assertEqual(job["state"], "JOB_STATE_SUCCEEDED", job)

        m3, m1 = self.metrics("output"), self.metrics("output-single")
        self.assertEqual((m3["world_size"], m3["backend"], m3["local_batch_size"]), (3, "gloo", 32))
        self.assertEqual((m1["world_size"], m1["local_batch_size"]), (1, 96))
        self.assertEqual(m3["global_batch_size"], m1["global_batch_size"])
        self.assertLess(m3["final_val_loss"], m3["history"][0]["val_loss"] / 2, "it did not learn")
        self.assertAlmostEqual(m3["final_val_loss"], m1["final_val_loss"],
                               delta=REL_TOLERANCE * m1["final_val_loss"])
        self.assertTrue(os.path.isfile(os.path.join(
            self.data, "buckets", "ddp", "output", "model", "model.pt")))

        # Every replica saw its own place in the job.
        expected = {"workerpool0-0": (0, "workerpool0", 0, "chief"),
                    "workerpool1-0": (1, "workerpool1", 0, "worker"),
                    "workerpool1-1": (2, "workerpool1", 1, "worker")}
        finals = set()
        chief_address = None
        for replica, (rank, pool, index, tf_role) in expected.items():
            text = self.log(ddp, replica)
            env = env_line(text)
            self.assertIsNotNone(env, replica + " printed no 'ddp env:' line:\n" + text[-2000:])
            self.assertEqual(env["RANK"], str(rank), replica)
            self.assertEqual(env["WORLD_SIZE"], "3", replica)
            self.assertEqual((env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]), ("0", "1"), replica)
            self.assertIsNotNone(env["CUDA_VISIBLE_DEVICES"], replica)
            cs, tf = env["CLUSTER_SPEC"], env["TF_CONFIG"]
            self.assertEqual(cs["task"], {"type": pool, "index": index}, replica)
            self.assertEqual(sorted(cs["cluster"]), ["workerpool0", "workerpool1"], replica)
            self.assertEqual(len(cs["cluster"]["workerpool0"]), 1)
            self.assertEqual(len(cs["cluster"]["workerpool1"]), 2)
            self.assertEqual(tf["task"], {"type": tf_role, "index": index}, replica)
            self.assertEqual(tf["cluster"]["chief"], cs["cluster"]["workerpool0"])
            self.assertEqual(tf["cluster"]["worker"], cs["cluster"]["workerpool1"])
            # MASTER_ADDR:MASTER_PORT is the chief's CLUSTER_SPEC address, the same for all.
            self.assertEqual("%s:%s" % (env["MASTER_ADDR"], env["MASTER_PORT"]),
                             cs["cluster"]["workerpool0"][0], replica)
            chief_address = chief_address or cs["cluster"]["workerpool0"][0]
            self.assertEqual(cs["cluster"]["workerpool0"][0], chief_address)
            timing = json.loads(re.search(r"^ddp timing: (.*)$", text, re.M).group(1))
            self.assertEqual((timing["rank"], timing["backend"]), (rank, "gloo"))
            finals.add(re.search(r"final val_loss=(\S+)", text).group(1))
        # The metric is all-reduced: every replica reports the same value.
        self.assertEqual(len(finals), 1, finals)
        single_env = env_line(self.log(single, "workerpool0-0"))
        self.assertEqual((single_env["RANK"], single_env["WORLD_SIZE"]), ("0", "1"))

    def test_a_failing_worker_fails_the_job_and_stops_the_other_replicas(self):
        self.stoker("storage", "mb", "gs://ddp")
        # Rank 2 (workerpool1-1) exits with 7 instead of joining the process
        # group; the chief and the other worker are left in the rendezvous,
        # which on their own would wait --pg_timeout_s (300 s).
        job_id = self.submit_example(
            "job.yaml", "--args=--epochs=10,--fail_rank=2,--fail_exit_code=7,--fail_at=init")
        job = self.wait_state(job_id, timeout=120)
        self.assertEqual(job["state"], "JOB_STATE_FAILED", job)
        message = job["error"]["message"]
        self.assertIn("workerpool1-1", message)
        self.assertIn("non-zero status of 7", message)
        self.assertIn("injected failure: rank 2 exits with status 7", message)  # the log tail

        # Neither the other replicas nor their supervisors outlive the job.
        job_dir = os.path.join(self.data, "jobs", job_id)
        for replica in ("workerpool0-0", "workerpool1-0", "workerpool1-1"):
            rdir = self.replica_dir(job_id, replica)
            wait_for(lambda: os.path.exists(os.path.join(rdir, "status.json")), 30,
                     replica + " to end")
            for name in ("runner.json", "trainer.json"):
                path = os.path.join(rdir, name)
                if os.path.exists(path):
                    with open(path) as f:
                        pid = json.load(f)["pid"]
                    wait_for(lambda: not pid_alive(pid), 30, "%s pid %d to exit" % (name, pid))
        wait_for(lambda: not self.processes_under(job_dir), 30,
                 "every process of job %s to exit" % job_id)
        def status(replica):
            with open(os.path.join(self.replica_dir(job_id, replica), "status.json")) as f:
                return json.load(f)
        failed_end = status("workerpool1-1")["end_time_us"]
        for replica in ("workerpool0-0", "workerpool1-0"):
            st = status(replica)
            # Stopped by Stoker (SIGTERM through its supervisor), soon after the
            # failure, not by the rendezvous timing out.
            self.assertEqual(st["state"], "cancelled", (replica, st))
            self.assertLess(st["end_time_us"] - failed_end, 15e6, (replica, st))
            self.assertNotIn("final val_loss", self.log(job_id, replica))

    @staticmethod
    def processes_under(directory):
        """Pids of live processes whose working directory is inside `directory`."""
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                cwd = os.readlink("/proc/%s/cwd" % entry)
            except OSError:
                continue
            if (cwd == directory or cwd.startswith(directory + os.sep)) and pid_alive(int(entry)):
                found.append(int(entry))
        return found


if __name__ == "__main__":
    import unittest
    unittest.main()


class ChiefEndsTest(StokerTestCase):
    """Vertex's rule: the job ends with its chief; workers still running are
    stopped, and both the job's events and their logs say so."""

    def test_workers_stopped_because_the_chief_ended_get_an_event_and_a_whole_last_line(self):
        # Each worker writes half a line and waits; the chief ends after 5 s.
        worker = "printf 'half a line'; exec sleep 60"
        pools = [{"machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 2,
                  "containerSpec": {"imageUri": IMAGE, "command": ["/bin/sh", "-c", worker]}}]
        chief = "sleep 5; echo chief done"
        job_id = self.submit(container_job("chief-ends", chief, pools=pools))
        self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")
        events = self.api("GET", self.project_path + "/" + job_id + "/events")[1]["events"]
        reasons = [e.get("reason", "") for e in events]
        self.assertIn("stopping workerpool1-0, workerpool1-1: the job ended while they still ran",
                      reasons, reasons)
        for r in ("workerpool1-0", "workerpool1-1"):
            path = os.path.join(self.replica_dir(job_id, r), "output.log")
            text = wait_for(lambda: os.path.exists(os.path.join(self.replica_dir(job_id, r),
                                                                "status.json"))
                            and read_text(path), 60, r + " to end")
            self.assertRegex(text, r"^half a line\nstoker-run: cancelled; stopped with SIGTERM")
            self.assertTrue(text.endswith("\n"), text)
