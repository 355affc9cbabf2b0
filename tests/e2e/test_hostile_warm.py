"""Warm interpreters tried as an attacker would (issue #28, docs/warm-starts.md
"How many", docs/security.md "Warm interpreters"): a root daemon whose
trainers run as nobody. A job cannot start interpreters at will by varying
its start-up variables, no interpreter runs as root for a trainer that is
not root, and the node's limits hold (the least recently used idle one
makes room; when all are busy the trainer starts cold and says why).

Real stokerd, real stoker-run, real zygotes, Debian's python3-torch."""
import glob
import json
import os
import unittest

from harness import DEFAULT_CONFIG, read_text, wait_for
import test_warm_starts
from test_warm_starts import JOBS, zygotes_of

# Root daemon, trainers as nobody (the default), isolation as configured by default (auto).
NOBODY_CONFIG = DEFAULT_CONFIG.replace("default_unix_user: root\nallow_root_trainers: true\n",
                                       "") + "warm_start_idle_seconds: 120\n"

# Waits until the file named by argv[1] exists: a trainer that keeps its
# zygote busy for as long as the test wants.
HOLD = r'''
import os, sys, time
open(os.path.join(os.environ["TRACE_DIR"], "holding-%d" % os.getpid()), "w").close()
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
'''


def status_ids(pid, field):
    """The four ids of /proc/PID/status's Uid: or Gid: line."""
    for line in read_text("/proc/%d/status" % pid).splitlines():
        if line.startswith(field + ":"):
            return [int(x) for x in line.split()[1:]]
    raise AssertionError("no %s line for %d" % (field, pid))


class NobodyWarmCase(test_warm_starts.NobodyWarmCase):
    config = NOBODY_CONFIG

    def records(self):
        """The zygote records in the daemon's warm dir: {key: record}."""
        out = {}
        for path in glob.glob(os.path.join(self.data, "warm", "*.json")):
            record = json.loads(read_text(path))
            out[record["key"]] = record
        return out


class WarmAccountsTest(NobodyWarmCase):

    def test_distinct_start_up_values_do_not_start_interpreters_and_none_is_root(self):
        plain = self.submit(self.python_job([self.probe]))
        self.assertEqual(self.wait_state(plain, timeout=120)["state"], "JOB_STATE_SUCCEEDED",
                         self.log(plain))
        note = self.wait_note(plain)[0]
        self.assertIn("warm start: forked from the warm interpreter (torch, numpy preloaded)", note)
        self.assertIn("it runs as uid 65534", note)
        self.assertTrue(self.probe_of(plain)["torch_was_loaded"])
        [zygote] = zygotes_of(self.data)
        # Not root, in any of its ids, nor in its groups' place.
        self.assertEqual(status_ids(zygote, "Uid"), [65534] * 4)
        self.assertNotIn(0, status_ids(zygote, "Gid"))
        # Not dumpable: its /proc files are root's, so no other process of
        # nobody's may trace it or read its memory.
        self.assertEqual(os.stat("/proc/%d/environ" % zygote).st_uid, 0)

        jobs = {n: self.submit(self.python_job([self.probe], env={"OMP_NUM_THREADS": str(n)}))
                for n in range(1, 11)}
        for n, job in jobs.items():
            self.assertEqual(self.wait_state(job, timeout=120)["state"], "JOB_STATE_SUCCEEDED",
                             self.log(job))
            self.assertIn("cold start: OMP_NUM_THREADS=%d differs from the warm interpreter's, "
                          "which has none (read at interpreter start-up" % n,
                          self.wait_note(job)[0])
            self.assertFalse(self.probe_of(job)["torch_was_loaded"])  # really cold
        # Still the one interpreter, and one record of it.
        self.assertEqual(zygotes_of(self.data), [zygote])
        self.assertEqual(len(self.records()), 1)


TWO_USERS_MAX_TOTAL_1 = NOBODY_CONFIG + "warm_start_max_total: 1\n"


class WarmLimitsTest(NobodyWarmCase):
    config = TWO_USERS_MAX_TOTAL_1

    def test_max_total_ends_the_idle_one_and_a_busy_node_starts_cold(self):
        alice, bob = self.add_user("alice"), self.add_user("bob")
        hold = self.write("hold.py", HOLD)
        release = os.path.join(self.trace, "release")
        held = self.submit_as(alice, self.python_job([hold, release]))
        wait_for(lambda: glob.glob(os.path.join(self.trace, "holding-*")), 120,
                 "alice's trainer to hold her warm interpreter")
        self.assertIn("warm start:", self.wait_note(held)[0])
        self.assertIn("kept for alice", self.wait_note(held)[0])
        [alices] = zygotes_of(self.data)

        # Bob's trainer would need a second interpreter; alice's is busy.
        cold = self.submit_as(bob, self.python_job([self.probe]))
        self.assertEqual(self.wait_state(cold, timeout=120)["state"], "JOB_STATE_SUCCEEDED",
                         self.log(cold))
        self.assertIn("cold start: this node already has 1 warm interpreters, none idle "
                      "(warm_start_max_total: 1)", self.wait_note(cold)[0])
        self.assertEqual(zygotes_of(self.data), [alices])

        # Once alice's is idle, bob's next trainer ends it and starts his own.
        with open(release, "w"):
            pass
        self.assertEqual(self.wait_state(held, timeout=60)["state"], "JOB_STATE_SUCCEEDED",
                         self.log(held))
        warm = self.submit_as(bob, self.python_job([self.probe]))
        self.assertEqual(self.wait_state(warm, timeout=120)["state"], "JOB_STATE_SUCCEEDED",
                         self.log(warm))
        self.assertIn("kept for bob", self.wait_note(warm)[0])
        wait_for(lambda: len(zygotes_of(self.data)) == 1 and alices not in zygotes_of(self.data),
                 30, "alice's idle interpreter to be ended for bob's")
        self.assertEqual([r["user"] for r in self.records().values()], ["bob"])
        self.assertIn("exiting: asked to (SIGTERM)",
                      "".join(read_text(p) for p in glob.glob(os.path.join(self.data, "warm",
                                                                           "*.log"))))


# A node of 3 GB, booked at face value: a job that asks for 2.95 GB fits it
# alone, and not beside a warm interpreter (about 250 MB with torch).
BOOKED_CONFIG = NOBODY_CONFIG.replace("cpu_oversubscription: 16", "cpu_oversubscription: 1") + """
inventory: {cpus: 4, memory_gb: 3}
machine_types:
  small: {vcpus: 1, memory_gb: 0.5}
  nearly-all: {vcpus: 1, memory_gb: 2.95}
"""


class WarmMemoryBookingTest(NobodyWarmCase):
    """A live warm interpreter's memory is booked to the user it serves
    (docs/warm-starts.md "Memory"): the scheduler does not place a job in
    it, `stoker nodes` says whose it is, and it is free again once the
    interpreter ends."""

    config = BOOKED_CONFIG

    def job_on(self, machine, args, label="true"):
        job = self.python_job(args, label=label)
        job["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["machineType"] = machine
        return job

    def nodes(self):
        status, body = self.api("GET", "/v1/stoker/nodes")
        self.assertEqual(status, 200, body)
        [node] = body["nodes"]
        return node

    def test_a_live_warm_interpreter_holds_its_memory_for_its_user(self):
        warm = self.submit(self.job_on("small", [self.probe]))
        self.assertEqual(self.wait_state(warm, timeout=120)["state"], "JOB_STATE_SUCCEEDED",
                         self.log(warm))
        self.assertIn("warm start:", self.wait_note(warm)[0])
        [zygote] = zygotes_of(self.data)
        user = self.job(warm)["stoker"]["user"]
        # No job runs; the interpreter's resident memory is booked, to its user.
        node = wait_for(lambda: (lambda n: n if n["held"] else None)(self.nodes()), 30,
                        "the warm interpreter to be booked")
        [held] = node["held"]
        self.assertEqual((held["user"], held["what"]), (user, "warm interpreter"))
        self.assertGreater(held["memory_bytes"], 50 << 20)
        self.assertEqual(node["memory_booked_bytes"], held["memory_bytes"])
        self.assertIn("warm interpreter of user %s:" % user, self.stoker("nodes").stdout)

        # A job that needs nearly all of the node waits for it, saying why.
        big = self.submit(self.job_on("nearly-all", [self.probe], label="false"))
        reason = wait_for(lambda: self.api("GET", self.project_path + "/" + big + "/events")[1]
                          .get("waitReason"), 30, "a wait reason")
        self.assertIn("memory", reason)
        self.assertEqual(self.job(big)["state"], "JOB_STATE_QUEUED")
        # The interpreter ends (as after warm_start_idle_seconds): the job starts.
        os.kill(zygote, 15)
        self.assertEqual(self.wait_state(big, timeout=60)["state"], "JOB_STATE_SUCCEEDED",
                         self.log(big))
        wait_for(lambda: self.nodes()["held"] == [], 30, "the booking to end with the interpreter")


if __name__ == "__main__":
    unittest.main()
