"""Container jobs through a real Slurm (docs/containers.md, "On Slurm"):
stokerd with the Slurm executor submits the attempt with sbatch, stoker-run
on the node runs the image with the node's engine (podman), and a chief and
a worker in separate containers reach each other on the host network. Cancel
through Slurm leaves no container behind.

Skipped without STOKER_TEST_SLURM=1 (CI runs it after
scripts/slurm-localhost.sh, .ci/run); needs podman and the base image of
scripts/container-base-image.sh.

Run: STOKER_TEST_SLURM=1 python3 tests/e2e/test_slurm_containers.py
"""
import os

from harness import (BASE_IMAGE, DEFAULT_CONFIG, StokerTestCase, cancel_slurm_jobs_of, main,
                     podman, podman_setup_error, read_text, skip_or_fail, slurm_jobs_of,
                     wait_for)
from test_executor_contract import require_slurm

DDP = ("import torch, torch.distributed as d; d.init_process_group('gloo'); "
       "t = torch.tensor([d.get_rank() + 1.0]); d.all_reduce(t); "
       "print('rank', d.get_rank(), 'sum', t.item(), 'in image', "
       "__import__('os').path.exists('/run/.containerenv'), flush=True); "
       "print('gcs', open('/gcs/slurm-data/in.txt').read(), flush=True)")


def pool(command, replicas=1):
    return {"machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": replicas,
            "containerSpec": {"imageUri": BASE_IMAGE, "command": command}}


class SlurmContainerTest(StokerTestCase):

    config = DEFAULT_CONFIG + "executor: slurm\nslurm: {grace_seconds: 5}\n"

    def setUp(self):
        require_slurm(self)
        why = podman_setup_error()
        if why:
            skip_or_fail(self, why)
        super().setUp()

    def tearDown(self):
        cancel_slurm_jobs_of(self.data)
        super().tearDown()

    def test_a_chief_and_a_worker_train_in_containers_placed_by_slurm(self):
        ddp = ["python3", "-c", DDP]
        src = os.path.join(self.tmp, "in.txt")
        with open(src, "w") as f:
            f.write("from-the-bucket")
        self.stoker("storage", "cp", src, "gs://slurm-data/in.txt")  # read at /gcs in each
        j = self.submit({"displayName": "slurm-ddp", "jobSpec": {
            "workerPoolSpecs": [pool(ddp), pool(ddp)], "scheduling": {"maxRetries": 0}}})
        done = self.wait_state(j, timeout=240)
        logs = self.stoker("jobs", "logs", j).stdout
        self.assertEqual(done["state"], "JOB_STATE_SUCCEEDED", logs + str(done))
        for rank in range(2):
            self.assertIn("rank %d sum 3.0 in image True" % rank, logs)
        self.assertEqual(logs.count("gcs from-the-bucket"), 2, logs)
        events = [e["reason"] for e in
                  self.api("GET", self.project_path + "/" + j + "/events")[1]["events"]]
        self.assertTrue(any("runs in a container: image " + BASE_IMAGE in e for e in events),
                        events)
        # Slurm ran it: the attempt was a Slurm job of this daemon's.
        self.assertTrue(slurm_jobs_of(self.data, ["-t", "all"]))
        self.assertEqual(self.containers_of(j), [])

    def test_cancel_through_slurm_leaves_no_container(self):
        j = self.submit({"displayName": "slurm-long", "jobSpec": {
            "workerPoolSpecs": [pool(["sleep", "600"])], "scheduling": {"maxRetries": 0}}})
        wait_for(lambda: self.containers_of(j), 120, "the container to run under Slurm")
        self.stoker("jobs", "cancel", j)
        self.assertEqual(self.wait_state(j, timeout=90)["state"], "JOB_STATE_CANCELLED")
        wait_for(lambda: not self.containers_of(j), 30, "the container to be removed")


if __name__ == "__main__":
    main()
