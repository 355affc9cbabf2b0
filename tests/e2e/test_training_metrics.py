"""Training metrics (docs/training-metrics.md): a trainer's hypertune reports
and TensorBoard scalars come back as time series from
GET .../customJobs/{id}/trainingMetrics and `stoker jobs metrics`; broken
event files are skipped with a reason and a job event, and the daemon keeps
answering.

Debian has no TensorBoard package, so the trainer carries a tiny event-file
writer of its own (TFRecord framing, CRC-32C, hand-encoded Event protobufs
in both scalar forms: PyTorch's simple_value and TF2's rank-0 tensor with
plugin "scalars")."""
import copy
import json
import re
import unittest

from harness import StokerTestCase, container_job, wait_for

WRITER = r'''
import json, os, struct, time

def _table():
    t = []
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t
T = _table()

def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = (c >> 8) ^ T[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF

def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

def record(data):
    n = struct.pack("<Q", len(data))
    return n + struct.pack("<I", masked(n)) + data + struct.pack("<I", masked(data))

def varint(v):
    out = b""
    while v >= 0x80:
        out += bytes([(v & 0x7F) | 0x80]); v >>= 7
    return out + bytes([v])

def key(field, wire): return varint(field << 3 | wire)
def ld(field, body): return key(field, 2) + varint(len(body)) + body

def event(step, values, t=None):
    t = time.time() if t is None else t
    return key(1, 1) + struct.pack("<d", t) + key(2, 0) + varint(step) + ld(5, b"".join(values))

def simple(tag, v):  # PyTorch SummaryWriter / tensorboardX
    return ld(1, ld(1, tag.encode()) + key(2, 5) + struct.pack("<f", v))

def tf2_float(tag, v, first=True):  # tf.summary.scalar: rank-0 DT_FLOAT in tensor_content
    meta = ld(9, ld(1, ld(1, b"scalars"))) if first else b""
    tensor = key(1, 0) + varint(1) + ld(2, b"") + ld(4, struct.pack("<f", v))
    return ld(1, ld(1, tag.encode()) + meta + ld(8, tensor))

def tf2_double(tag, v):  # a DT_DOUBLE scalar in double_val
    tensor = key(1, 0) + varint(2) + ld(2, b"") + key(6, 1) + struct.pack("<d", v)
    return ld(1, ld(1, tag.encode()) + ld(9, ld(1, ld(1, b"scalars"))) + ld(8, tensor))

logs = os.environ["AIP_TENSORBOARD_LOG_DIR"]
os.makedirs(os.path.join(logs, "train"), exist_ok=True)
version = record(key(1, 1) + struct.pack("<d", time.time()) + ld(3, b"brain.Event:2"))
'''

GOOD = WRITER + r'''
with open(os.path.join(logs, "events.out.tfevents.1.host"), "wb") as f:
    f.write(version)
    for step, loss in [(1, 0.5), (2, 0.25), (3, 0.125)]:
        f.write(record(event(step, [simple("loss", loss)])))
    f.write(record(event(1, [tf2_float("acc", 0.5), tf2_double("lr", 0.001)])))
    f.write(record(event(2, [tf2_float("acc", 0.75, first=False)])))
    f.write(record(event(3, [simple("evil\x1b[2J\ntag", 1.0), simple("nan", float("nan"))])))
with open(os.path.join(logs, "train", "events.out.tfevents.2.host"), "wb") as f:
    f.write(version + record(event(5, [simple("loss", 2.0)])))
with open(os.environ["CLOUD_ML_HP_METRIC_FILE"], "w") as f:
    for step, acc in [(1, 0.6), (2, 0.8)]:
        f.write(json.dumps({"timestamp": time.time(), "trial": "0", "accuracy": str(acc),
                            "global_step": str(step), "checkpoint_path": ""}) + "\n")
'''

BAD = WRITER + r'''
good = record(event(1, [simple("loss", 1.0)]))
bad = bytearray(record(event(2, [simple("loss", 2.0)])))
bad[-6] ^= 0x40  # a bit of the float, under the data CRC
with open(os.path.join(logs, "events.out.tfevents.crc"), "wb") as f:
    f.write(version + good + bytes(bad) + good)
huge = struct.pack("<Q", 1 << 62)
with open(os.path.join(logs, "events.out.tfevents.huge"), "wb") as f:
    f.write(huge + struct.pack("<I", masked(huge)) + b"x" * 64)
with open(os.path.join(logs, "events.out.tfevents.torn"), "wb") as f:
    f.write(version + good + good[:10])  # a writer that died mid-record
'''

# Each replica's process writes its own event file (named by host and pid,
# as TensorFlow and PyTorch name theirs) into the job's one log directory:
# `loss` = 10 * (pool + 1) + index at steps 1..5. The trainer of
# workerpool1-1 leaves the writing to a child (its replica's telemetry
# names it); workerpool1-0's file says it was written on another machine
# (as a file copied into the log directory would), so no replica is its writer.
REPLICAS = WRITER + r'''
import socket, subprocess, sys
started = time.time()
task = json.loads(os.environ["CLUSTER_SPEC"])["task"]
if (task["type"], task["index"]) == ("workerpool1", 1) and "CHILD" not in os.environ:
    sys.exit(subprocess.run([sys.executable, "-c", os.environ["TRAINER"]],
                            env=dict(os.environ, CHILD="1")).returncode)
loss = 10.0 * (int(task["type"][-1]) + 1) + task["index"]
host = "elsewhere" if (task["type"], task["index"]) == ("workerpool1", 0) else socket.gethostname()
name = "events.out.tfevents.%d.%s.%d.0.v2" % (time.time(), host, os.getpid())
with open(os.path.join(logs, "." + name), "wb") as f:
    f.write(version)
    for step in range(1, 6):
        f.write(record(event(step, [simple("loss", loss)])))
os.rename(os.path.join(logs, "." + name), os.path.join(logs, name))
# The job ends with its chief: every replica waits for all three files.
deadline = time.time() + 60
while len([n for n in os.listdir(logs) if n.startswith("events.out")]) < 3 and time.time() < deadline:
    time.sleep(0.05)
# Past the replica supervisors' first telemetry sample (one second in).
time.sleep(max(0, started + 3 - time.time()))
'''


def trainer_job(name, source):
    return container_job(name, 'python3 -c "$TRAINER"', env=[("TRAINER", source)])


def replicas_job(name, source):
    """Three replicas (workerpool0-0, workerpool1-0, workerpool1-1); exec: the
    trainer the supervisor started (trainer.json's pid) is python itself."""
    job = container_job(name, 'exec python3 -c "$TRAINER"', env=[("TRAINER", source)])
    pool = copy.deepcopy(job["jobSpec"]["workerPoolSpecs"][0])
    pool["replicaCount"] = 2
    job["jobSpec"]["workerPoolSpecs"].append(pool)
    return job


class TrainingMetricsTest(StokerTestCase):

    def metrics(self, job_id):
        status, body = self.api("GET", self.project_path + "/" + job_id + "/trainingMetrics")
        self.assertEqual(status, 200, body)
        return body

    def test_hypertune_and_both_tensorboard_scalar_forms_become_series(self):
        job_id = self.submit(trainer_job("tb", GOOD))
        job = self.wait_state(job_id)
        self.assertEqual(job["state"], "JOB_STATE_SUCCEEDED", job)
        m = self.metrics(job_id)
        by = {(s["name"], s["source"]): s["points"] for s in m["series"]}

        self.assertEqual([(p["step"], p["value"]) for p in by[("accuracy", "hypertune")]],
                         [(1, 0.6), (2, 0.8)])
        self.assertEqual([(p["step"], p["value"]) for p in by[("loss", "tensorboard")]],
                         [(1, 0.5), (2, 0.25), (3, 0.125)])
        self.assertEqual([p["value"] for p in by[("acc", "tensorboard")]], [0.5, 0.75])
        self.assertAlmostEqual(by[("lr", "tensorboard")][0]["value"], 0.001)
        self.assertEqual(by[("train/loss", "tensorboard")][0]["step"], 5)  # the run dir prefixes
        # t is unix seconds, from the event's wall_time.
        self.assertGreater(by[("loss", "tensorboard")][0]["t"], 1.7e9)
        # A hostile tag loses its control characters; a NaN value is left
        # out with a reason, never sent as a number JSON cannot hold.
        self.assertIn(("evil[2Jtag", "tensorboard"), by)
        self.assertNotIn(("nan", "tensorboard"), by)
        reasons = [s["reason"] for s in m["skipped"]]
        self.assertIn("tag 'nan': non-finite values (NaN or infinity) were left out, the first "
                      "at step 3", reasons)

        text = self.stoker("jobs", "metrics", job_id).stdout
        self.assertRegex(text, r"NAME\s+SOURCE\s+POINTS\s+LAST_STEP\s+LAST\s+MIN\s+MAX")
        self.assertRegex(text, r"(?m)^loss\s+tensorboard\s+3\s+3\s+0\.125\s+0\.125\s+0\.5\s*$")
        self.assertRegex(text, r"(?m)^accuracy\s+hypertune\s+2\s+2\s+0\.8\s+0\.6\s+0\.8\s*$")
        self.assertNotIn("\x1b", text)
        described = self.stoker("jobs", "describe", job_id).stdout
        self.assertRegex(described, r"(?m)^  metrics:  accuracy 0\.8 \(step 2\), .*loss 0\.125 \(step 3\)")
        as_json = json.loads(self.stoker("--format", "json", "jobs", "metrics", job_id).stdout)
        self.assertEqual(as_json["series"], m["series"])

    def test_the_cli_tells_apart_the_series_of_each_replica(self):
        job_id = self.submit(replicas_job("tb-replicas", REPLICAS))
        self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")
        series = [s for s in self.metrics(job_id)["series"] if s["name"] == "loss"]
        self.assertEqual(len(series), 3, series)
        self.assertEqual(sorted(s["replica"] for s in series if "replica" in s),
                         ["workerpool0-0", "workerpool1-1"], series)
        other = next(s["writer"] for s in series if "replica" not in s)
        self.assertRegex(other, r"^elsewhere pid \d+$")

        # One line per series, each named by its replica, else its writer.
        text = self.stoker("jobs", "metrics", job_id).stdout
        self.assertRegex(text, r"NAME\s+SOURCE\s+WRITER\s+POINTS\s+LAST_STEP\s+LAST\s+MIN\s+MAX")
        self.assertRegex(text, r"(?m)^loss\s+tensorboard\s+workerpool0-0\s+5\s+5\s+10\s+10\s+10\s*$")
        self.assertRegex(text, r"(?m)^loss\s+tensorboard\s+workerpool1-1\s+5\s+5\s+21\s+21\s+21\s*$")
        self.assertRegex(text, r"(?m)^loss\s+tensorboard\s+%s\s+5\s+5\s+20\s+20\s+20\s*$"
                         % re.escape(other))
        self.assertEqual(len(re.findall(r"(?m)^loss ", text)), 3, text)
        described = self.stoker("jobs", "describe", job_id).stdout
        self.assertRegex(described, r"(?m)^  metrics:  .*loss \[workerpool0-0\] 10 \(step 5\)")
        self.assertIn("loss [workerpool1-1] 21 (step 5)", described)
        self.assertIn("loss [%s] 20 (step 5)" % other, described)
        # --format json is the API's answer, writer and replica fields included.
        as_json = json.loads(self.stoker("--format", "json", "jobs", "metrics", job_id).stdout)
        self.assertEqual([s for s in as_json["series"] if s["name"] == "loss"], series)

    def test_broken_event_files_are_skipped_with_a_reason_and_an_event(self):
        job_id = self.submit(trainer_job("bad", BAD))
        self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")
        m = self.metrics(job_id)
        skipped = {s["file"]: s["reason"] for s in m["skipped"]}
        self.assertRegex(skipped["logs/events.out.tfevents.crc"],
                         r"^record 3 \(byte \d+\): data CRC mismatch$")
        self.assertRegex(skipped["logs/events.out.tfevents.huge"],
                         r"^record 1 \(byte 0\): length 4611686018427387904 is over the")
        # A torn tail is a file still being written, not an error.
        self.assertNotIn("logs/events.out.tfevents.torn", skipped)
        loss = [s for s in m["series"] if s["name"] == "loss"][0]["points"]
        # The record before the bad one counts, and the torn file's whole one.
        self.assertEqual(sorted(p["value"] for p in loss), [1.0, 1.0])

        def event_reasons():
            status, body = self.api("GET", self.project_path + "/" + job_id + "/events")
            self.assertEqual(status, 200, body)
            found = [e["reason"] for e in body["events"] if "training metrics" in e["reason"]]
            return found if len(found) >= 2 else None
        reasons = wait_for(event_reasons, 30, "the skipped files' job events")
        self.assertTrue(any(re.match(r"training metrics: skipped logs/events\.out\.tfevents\.crc: "
                                     r"record 3 \(byte \d+\): data CRC mismatch$", r)
                            for r in reasons), reasons)
        # Asked again: the same answer, no second event for the same file and reason.
        self.assertEqual(self.metrics(job_id)["skipped"], m["skipped"])
        status, _ = self.api("GET", "/healthz")
        self.assertEqual(status, 200)
        text = self.stoker("jobs", "metrics", job_id).stdout
        self.assertIn("skipped logs/events.out.tfevents.crc: record 3", text)
        self.stoker("jobs", "describe", job_id)  # triggers a loop turn's worth of time
        status, body = self.api("GET", self.project_path + "/" + job_id + "/events")
        crc_events = [e for e in body["events"] if "tfevents.crc" in e["reason"]]
        self.assertEqual(len(crc_events), 1, crc_events)

    def test_others_jobs_metrics_are_not_visible_and_unknown_jobs_are_404(self):
        status, body = self.api("GET", self.project_path + "/999/trainingMetrics")
        self.assertEqual(status, 404, body)
        status, body = self.api("GET", self.project_path + "/1/trainingMetrics?maxPoints=x")
        self.assertEqual(status, 400, body)


if __name__ == "__main__":
    unittest.main()
