"""The scheduling policy end to end (issue #4): a few dozen jobs of mixed
sizes, priorities and users on a declared inventory of four GPUs. Every
trainer appends when it started and ended on which GPU (with what share) to
one record; the test proves from that record and the jobs' events that no
GPU was booked beyond its capacity, gangs started together, priorities, fair
share and quotas held, and that `stoker queue` / `stoker nodes` explain it."""
import calendar
import json
import os
import signal
import time

from harness import IMAGE, StokerTestCase, container_job, read_text, wait_for

GPU = "NVIDIA_TESLA_T4"


def rfc3339_seconds(stamp):
    """Seconds since the epoch of an RFC 3339 UTC time ("...T10:00:00.123Z")."""
    whole, _, frac = stamp.rstrip("Z").partition(".")
    return calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + float("0." + (frac or "0"))


class SchedulingTest(StokerTestCase):
    config = StokerTestCase.config + """
inventory:
  cpus: 64
  memory_gb: 256
  gpus: [{type: NVIDIA_TESLA_T4}, {type: NVIDIA_TESLA_T4}, {type: NVIDIA_TESLA_T4}, {type: NVIDIA_TESLA_T4}]
aging_hours: 0
quotas:
  carol: {max_gpus: 1}
"""

    def token_for(self, user):
        self.stoker("admin", "users", "add", user, "--role", "user")
        return self.stoker("admin", "users", "token", user).stdout.strip().split()[-1]

    def job_file(self, name, seconds, gpus=0, priority=0, replicas=1, wait_for_file=None):
        # Each replica records: start|end, time (ns), job name, rank, GPUs, share.
        record = ('echo "%%s $(date +%%%%s%%%%N) %s $RANK ${CUDA_VISIBLE_DEVICES:--} '
                  '${STOKER_GPU_FRACTION:-1}" >> %s' % (name, self.record))
        script = (record % "start") + "; "
        if wait_for_file:
            script += "while [ ! -e %s ]; do sleep 0.05; done; " % wait_for_file
        script += "sleep %s; " % seconds
        worker_script = chief_script = script + (record % "end")
        workers = []
        if replicas > 1:
            # The job succeeds, and its workers are stopped, when the chief
            # exits (Vertex's rule): the chief waits for its workers' end
            # lines so that every replica's run is in the record.
            chief_script = script + (
                'while [ "$(grep -c \'^end [0-9]* %s \' %s)" -lt %d ]; do sleep 0.05; done; '
                % (name, self.record, replicas - 1)) + (record % "end")
            workers = [{
                "machineSpec": {"machineType": "e2-standard-2", "acceleratorType": GPU,
                                "acceleratorCount": gpus} if gpus else
                               {"machineType": "e2-standard-2"},
                "replicaCount": replicas - 1,
                "containerSpec": {"imageUri": IMAGE, "command": ["/bin/sh", "-c", worker_script]},
            }]
        job = container_job(name, chief_script, accelerator=(GPU, gpus) if gpus else None,
                            pools=workers, timeout="120s")
        job["jobSpec"]["scheduling"]["priority"] = priority
        return job

    def placed_at(self, job_id):
        events = self.api("GET", self.project_path + "/" + job_id + "/events")[1]["events"]
        return [e["time"] for e in events if e["to"] == "JOB_STATE_PENDING"][0]

    def test_a_mixed_queue_keeps_every_rule(self):
        self.record = os.path.join(self.tmp, "record.log")
        release = os.path.join(self.tmp, "release")
        alice, bob, carol = (self.token_for(u) for u in ("alice", "bob", "carol"))

        # Alice has used the whole cluster for a while: fair share puts her last,
        # also after a daemon restart (usage is rebuilt from the job history).
        first = self.submit_as(alice, self.job_file("alice-history", 4, gpus=4))
        self.assertEqual(self.wait_state(first)["state"], "JOB_STATE_SUCCEEDED")
        self.daemon.kill(signal.SIGTERM)
        self.daemon.start()

        # A blocker holds every GPU while the mix queues up behind it. Jobs are
        # submitted in an order that plain FIFO would get wrong: lowest
        # priority first, alice before bob, the highest priorities last.
        blocker = self.submit(self.job_file("blocker", 0, gpus=4, wait_for_file=release))
        wait_for(lambda: self.job(blocker)["state"] == "JOB_STATE_RUNNING", 30, "blocker")
        blocker_placed = self.placed_at(blocker)
        jobs = {}
        jobs["large"] = self.submit(self.job_file("large", 1, gpus=4, priority=-5))
        jobs["gang3"] = self.submit(self.job_file("gang3", 1, gpus=1, replicas=3))
        for i in range(4):
            jobs["alice%d" % i] = self.submit_as(alice, self.job_file("alice%d" % i, 1, gpus=1))
            jobs["bob%d" % i] = self.submit_as(bob, self.job_file("bob%d" % i, 1, gpus=1))
        for i in range(3):
            jobs["carol%d" % i] = self.submit_as(carol, self.job_file("carol%d" % i, 1, gpus=1))
        for i in range(4):
            jobs["share%d" % i] = self.submit(self.job_file("share%d" % i, 1.5, gpus=0.25,
                                                            priority=1))
        for i in range(3):
            jobs["cpu%d" % i] = self.submit(self.job_file("cpu%d" % i, 0.5))
        jobs["gang2"] = self.submit(self.job_file("gang2", 1, gpus=1, priority=5, replicas=2))
        for i in range(2):
            jobs["high%d" % i] = self.submit(self.job_file("high%d" % i, 1, gpus=1, priority=10))

        # While blocked: the queue explains itself, highest priority first,
        # with a start estimate from how long a job of the blocker's shape ran
        # before (alice-history, about 4 s), never from its 120 s timeout.
        def queue_ready():
            q = json.loads(self.stoker("--format", "json", "queue").stdout)["jobs"]
            return q if len(q) >= 20 and q[0]["displayName"] in ("high0", "high1") else None
        queue = wait_for(queue_ready, 20, "the queue to list the waiting jobs")
        self.assertEqual({q["displayName"] for q in queue[:2]}, {"high0", "high1"})
        self.assertEqual(queue[2]["displayName"], "gang2")
        self.assertEqual(queue[-1]["displayName"], "large")
        self.assertIn("NVIDIA_TESLA_T4", queue[0]["reason"])
        for q in queue:
            self.assertTrue(q["reason"], q)
        estimate = rfc3339_seconds(queue[0]["estimatedStartTime"])
        self.assertLess(estimate, rfc3339_seconds(blocker_placed) + 60)
        text = self.stoker("queue").stdout
        self.assertIn("WHY IT WAITS", text)
        self.assertRegex(text, r"high0 .* (now|in [0-9.]+s) ")  # the estimate, relative to now
        nodes = json.loads(self.stoker("--format", "json", "nodes").stdout)["nodes"]
        self.assertEqual(len(nodes[0]["gpus"]), 4)
        for gpu in nodes[0]["gpus"]:
            self.assertEqual([h["job"] for h in gpu["holders"]], [blocker])
            self.assertNotIn("utilization_percent", gpu)  # declared GPUs: no NVML numbers
        self.assertIn("running job " + blocker, self.stoker("nodes").stdout)
        listing = self.stoker("jobs", "list").stdout
        self.assertIn("needs", listing)  # list shows why queued jobs wait
        described = self.stoker("jobs", "describe", jobs["high0"]).stdout
        self.assertIn("needs 1x NVIDIA_TESLA_T4, 0 free", described)

        open(release, "w").close()
        for name, job_id in jobs.items():
            self.assertEqual(self.wait_state(job_id, timeout=120)["state"], "JOB_STATE_SUCCEEDED",
                             name)

        # ---- Replay the record. ----
        runs = {}  # (job, rank) -> [start, end, gpus, share]
        for line in read_text(self.record).splitlines():
            kind, stamp, name, rank, gpus, share = line.split()
            entry = runs.setdefault((name, rank), [None, None, gpus, float(share)])
            entry[0 if kind == "start" else 1] = int(stamp)
        for key, (start, end, _, _) in runs.items():
            self.assertIsNotNone(start, key)
            self.assertIsNotNone(end, key)
        started = {}  # job name -> when its first replica started (ns)
        for (name, _), (start, _, _, _) in runs.items():
            started[name] = min(start, started.get(name, start))

        # 1. No GPU ever held beyond its capacity (shares add up to at most 1).
        changes = []
        for (name, rank), (start, end, gpus, share) in runs.items():
            if gpus == "-":
                continue
            for g in gpus.split(","):
                changes.append((start, 1, g, share, name))
                changes.append((end, 0, g, -share, name))
        held = {}
        for stamp, _, g, delta, name in sorted(changes):
            held[g] = held.get(g, 0) + delta
            self.assertLessEqual(held[g], 1 + 1e-9, "GPU %s over-booked when %s started" % (g, name))

        # 2. Gangs started together and overlapped.
        for gang, size in (("gang2", 2), ("gang3", 3)):
            members = [v for (n, _), v in runs.items() if n == gang]
            self.assertEqual(len(members), size)
            starts = [m[0] for m in members]
            self.assertLess(max(starts) - min(starts), 2e9, gang)
            self.assertLess(max(starts), min(m[1] for m in members), gang + " did not overlap")

        # 3. Priority, from the record: the two priority-10 jobs and the
        # priority-5 gang (submitted last) started before every priority-0
        # whole-GPU job; the priority -5 job (submitted first) after every
        # other GPU job.
        singles = [n for n in jobs if n.startswith(("alice", "bob", "carol", "gang3"))]
        for high in ("high0", "high1", "gang2"):
            for other in singles:
                self.assertLess(started[high], started[other], "%s before %s" % (high, other))
        for other in jobs:
            if other not in ("large",) and not other.startswith("cpu"):
                self.assertLess(started[other], started["large"], "%s before large" % other)

        # 4. Fair share: bob (no history) before alice (a 4-GPU history from
        # before the restart), same priority and shape, alice submitted first.
        # Compared by placement (the PENDING event, written in decision
        # order): a bob and an alice placed by one decision may see their
        # trainers start in either order.
        def placed(name):
            events = self.api("GET", self.project_path + "/" + jobs[name] + "/events")[1]
            return min(e["time"] for e in events["events"] if e["to"] == "JOB_STATE_PENDING")
        self.assertLessEqual(max(placed("bob%d" % i) for i in range(4)),
                             min(placed("alice%d" % i) for i in range(4)))

        # 5. Quota: carol never held more than one GPU, and was told why she waited.
        carol_runs = sorted(v[:2] for (n, _), v in runs.items() if n.startswith("carol"))
        for a, b in zip(carol_runs, carol_runs[1:]):
            self.assertLessEqual(a[1], b[0], "carol ran two jobs at once despite max_gpus: 1")
        reasons = []
        for i in range(3):
            events = self.api("GET", self.project_path + "/" + jobs["carol%d" % i] + "/events")[1]
            reasons += [e["reason"] for e in events["events"]]
        self.assertTrue(any("quota" in r for r in reasons), reasons)

        # 6. Shares of one GPU packed onto the same GPU at the same time.
        shares = [v for (n, _), v in runs.items() if n.startswith("share")]
        self.assertTrue(all(s[3] == 0.25 for s in shares), shares)
        packed = any(a is not b and a[2] == b[2] and a[0] < b[1] and b[0] < a[1]
                     for a in shares for b in shares)
        self.assertTrue(packed, "no two 0.25-GPU jobs shared a GPU: %s" % shares)


class SubstitutionTest(StokerTestCase):
    """A job asks for a T4 on a machine with only an L4 (24 GB >= 16 GB)."""
    config = StokerTestCase.config + """
inventory:
  cpus: 8
  memory_gb: 32
  gpus: [{type: NVIDIA_L4}]
"""

    def test_a_bigger_gpu_serves_a_missing_type_and_the_job_says_so(self):
        job = container_job("sub", 'echo "gpus=$CUDA_VISIBLE_DEVICES"',
                            accelerator=("NVIDIA_TESLA_T4", 1))
        job_id = self.submit(job)
        self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")
        self.assertIn("gpus=0", self.stoker("jobs", "logs", job_id).stdout)
        events = self.api("GET", self.project_path + "/" + job_id + "/events")[1]["events"]
        self.assertTrue(any("NVIDIA_TESLA_T4 served by GPU 0 (NVIDIA_L4)" in e["reason"]
                            for e in events), events)
        # A type with more memory than any GPU here (80 GB) is refused at once.
        status, body = self.api("POST", self.project_path, container_job(
            "big", "true", accelerator=("NVIDIA_H100_80GB", 1)))
        self.assertEqual(status, 400, body)
        self.assertIn("workerPoolSpecs[0].machineSpec.acceleratorCount", body["error"]["message"])


class NoSubstitutionTest(StokerTestCase):
    config = StokerTestCase.config + """
inventory:
  cpus: 8
  memory_gb: 32
  gpus: [{type: NVIDIA_L4}]
accelerator_substitution: false
"""

    def test_without_substitution_a_missing_type_is_refused_with_the_numbers(self):
        status, body = self.api("POST", self.project_path, container_job(
            "sub", "true", accelerator=("NVIDIA_TESLA_T4", 1)))
        self.assertEqual(status, 400, body)
        message = body["error"]["message"]
        self.assertIn("workerPoolSpecs[0].machineSpec.acceleratorCount", message)
        self.assertIn("1 GPU(s)", message)


if __name__ == "__main__":
    import unittest
    unittest.main()
