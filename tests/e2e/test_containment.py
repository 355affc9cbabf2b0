"""Every process a replica starts dies with it, and a replica that uses more
memory than its machine type is stopped and named (docs/security.md
"Containment", src/replica/replica_cgroup.h): one cgroup per replica.

The hostile trainer here does what escaped every earlier clean up: setsid,
a double fork and an exec with an empty environment (no process group, no
parent link to the supervisor, no STOKER_REPLICA cookie). Cold, warm and
container trainers; real stokerd, stoker-run, zygote and podman. Needs root
(cgroups) and, for the container case, podman and the base image."""

import json
import os
import random
import subprocess
import time
import unittest

from harness import (BASE_IMAGE, DEFAULT_CONFIG, IMAGE, StokerTestCase, podman_setup_error,
                     read_text, skip_or_fail, wait_for)

# A trainer that leaves a grandchild behind: `sleep MARKER` in a new session,
# orphaned, with an empty environment. The marker is unique to the test.
ESCAPE_SH = ("setsid sh -c 'env -i /bin/sleep %(marker)d & exit 0' & "
             "echo launched; exec /bin/sleep %(marker2)d")

ESCAPE_PY = r'''
import os, sys, time
marker = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execve("/bin/sleep", ["/bin/sleep", marker], {})
    os._exit(0)
print("launched", flush=True)
time.sleep(300)
'''

HOG = "b = bytearray(1 << 30)\nprint('survived', len(b))\n"

CONFIG = DEFAULT_CONFIG + """
warm_start_idle_seconds: 60
machine_types:
  small-mem: {vcpus: 1, memory_gb: 0.25}
"""


def pids_of(marker):
    r = subprocess.run(["pgrep", "-f", "^/bin/sleep %d$" % marker], capture_output=True,
                       text=True)
    return [int(p) for p in r.stdout.split()]


def have_cgroups():
    if os.geteuid() != 0:
        return "cgroups need root"
    with open("/proc/self/cgroup") as f:
        text = f.read()
    if ":freezer:" not in text and not os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        return "neither a cgroup v1 freezer nor cgroup v2 is mounted"
    return None


class ContainmentTest(StokerTestCase):
    config = CONFIG

    def setUp(self):
        why = have_cgroups()
        if why:
            skip_or_fail(self, why)
        super().setUp()
        self.markers = []

    def tearDown(self):
        super().tearDown()
        for m in self.markers:
            for pid in pids_of(m):
                os.kill(pid, 9)

    def marker(self):
        m = random.randint(10_000_000, 99_999_999)
        self.markers.append(m)
        return m

    def pool(self, command, image=IMAGE, machine="e2-standard-2"):
        return {"machineSpec": {"machineType": machine}, "replicaCount": 1,
                "containerSpec": {"imageUri": image, "command": command}}

    def make_job(self, pool, labels=None):
        job = {"displayName": "contained", "jobSpec": {"workerPoolSpecs": [pool]}}
        if labels:
            job["labels"] = labels
        return job

    def cancel_and_check_gone(self, job_id, marker):
        wait_for(lambda: pids_of(marker), 120, "the escaped grandchild `sleep %d`" % marker)
        self.assertEqual(len(pids_of(marker)), 1)
        t0 = time.monotonic()
        self.stoker("jobs", "cancel", job_id)
        final = self.wait_state(job_id, timeout=60)
        self.assertEqual(final["state"], "JOB_STATE_CANCELLED")
        # By the time the job reads cancelled the whole cgroup is gone; the
        # trainer's grace (1 s here) plus one second at most.
        self.assertEqual(pids_of(marker), [], "the grandchild outlived its replica")
        self.assertLess(time.monotonic() - t0, 1 + 1 + 5)  # grace + 1 s + the poll of the job
        return final

    def test_a_cold_trainers_escaped_grandchild_dies_on_cancel(self):
        m = self.marker()
        job = self.submit(self.make_job(self.pool(
            ["/bin/sh", "-c", ESCAPE_SH % {"marker": m, "marker2": self.marker()}])))
        self.cancel_and_check_gone(job, m)

    def test_a_warm_trainers_escaped_grandchild_dies_on_cancel(self):
        if subprocess.run(["/usr/bin/python3", "-c", "import torch"]).returncode != 0:
            skip_or_fail(self, "Debian's python3-torch is needed (scripts/install-deps.sh --test)")
        script = self.write("escape.py", ESCAPE_PY)
        m = self.marker()
        job = self.submit(self.make_job(self.pool(["python3", script, str(m)]),
                                   labels={"stoker-warm-start": "true"}))
        self.cancel_and_check_gone(job, m)
        events = [e["reason"] for e in self.api(
            "GET", self.project_path + "/" + job + "/events")[1]["events"]]
        self.assertTrue(any("warm start:" in e for e in events), events)

    def test_a_container_trainers_escaped_grandchild_dies_on_cancel(self):
        why = podman_setup_error()
        if why:
            skip_or_fail(self, why)
        m = self.marker()
        job = self.submit(self.make_job(self.pool(
            ["/bin/sh", "-c", ESCAPE_SH % {"marker": m, "marker2": self.marker()}],
            image=BASE_IMAGE)))
        self.cancel_and_check_gone(job, m)

    def test_a_killed_supervisors_escaped_grandchild_dies_when_stokerd_finds_it_lost(self):
        m = self.marker()
        job = self.submit(self.make_job(self.pool(
            ["/bin/sh", "-c", ESCAPE_SH % {"marker": m, "marker2": self.marker()}])))
        escaped = wait_for(lambda: pids_of(m), 120, "the escaped grandchild `sleep %d`" % m)
        runner = os.path.join(self.replica_dir(job), "runner.json")
        supervisor = wait_for(lambda: os.path.exists(runner) and json.loads(read_text(runner))["pid"],
                              30, "runner.json")
        os.kill(supervisor, 9)
        # A lost replica is the infrastructure's fault: the job is retried,
        # after stokerd killed what was left of the lost one.
        wait_for(lambda: "died without reporting" in json.dumps(self.api(
            "GET", self.project_path + "/" + job + "/events")[1]), 60, "the replica to be found lost")
        # The retry runs the same command again: its grandchild has a new pid.
        self.assertEqual([p for p in pids_of(m) if p in escaped], [],
                         "the grandchild outlived its lost supervisor")
        self.stoker("jobs", "cancel", job)
        self.wait_state(job, timeout=60)

    def test_an_escaped_grandchild_dies_when_the_trainer_ends_on_its_own(self):
        m = self.marker()
        job = self.submit(self.make_job(self.pool(
            ["/bin/sh", "-c", "setsid sh -c 'env -i /bin/sleep %d & exit 0'; "
             "while ! pgrep -f '^/bin/sleep %d$' >/dev/null; do sleep 0.05; done" % (m, m)])))
        final = self.wait_state(job, timeout=120)
        self.assertEqual(final["state"], "JOB_STATE_SUCCEEDED")
        self.assertEqual(pids_of(m), [])

    def test_a_memory_hog_is_killed_and_named(self):
        job = self.submit(self.make_job(self.pool(["/usr/bin/python3", "-c", HOG],
                                             machine="small-mem")))
        final = self.wait_state(job, timeout=120)
        self.assertEqual(final["state"], "JOB_STATE_FAILED", final)
        message = final["error"]["message"]
        self.assertIn("workerpool0-0 used more than its 256 MB (small-mem)", message)
        self.assertIn("ask for a larger machine type", message)
        self.assertNotIn("survived", read_text(os.path.join(self.replica_dir(job), "output.log")))
        # Not retried: the same limit would be exceeded again.
        events = [e["reason"] for e in self.api(
            "GET", self.project_path + "/" + job + "/events")[1]["events"]]
        self.assertFalse(any("retry" in e.lower() for e in events), events)

    def test_no_replica_cgroup_is_left_behind(self):
        job = self.submit(self.make_job(self.pool(["/bin/sh", "-c", "exit 0"])))
        self.assertEqual(self.wait_state(job, timeout=60)["state"], "JOB_STATE_SUCCEEDED")
        cookie = os.path.realpath(self.replica_dir(job))
        left = subprocess.run(["find", "/sys/fs/cgroup", "-maxdepth", "6", "-type", "d",
                               "-name", "r-*-workerpool0-0"], capture_output=True, text=True)
        # Other tests' replicas may be running; ours has its own hash.
        self.assertNotIn(cgroup_name(cookie), left.stdout)


def cgroup_name(cookie):
    """ReplicaCgroupName (src/runner/replica_cgroup.cc): FNV-1a of the cookie."""
    h = 1469598103934665603
    for b in cookie.encode():
        h ^= b
        h = (h * 1099511628211) % (1 << 64)
    return "r-%016x-%s" % (h, os.path.basename(cookie))


if __name__ == "__main__":
    unittest.main()
