"""The checkpointing example (examples/checkpointing, issue #20): a trainer
interrupted and restarted ends with bit-for-bit the model of an
uninterrupted run, redoing at most --checkpoint-every steps per SIGKILL and
none after a SIGTERM.

CheckpointStoreTest tests trainer/checkpoint.py alone; CheckpointExampleTest
and CheckpointDirErrorTest run the trainer process directly, setting what
Stoker sets for each attempt (AIP_CHECKPOINT_DIR, AIP_MODEL_DIR,
STOKER_ATTEMPT, STOKER_RESTART_REASON); no daemon is needed.
The kill points are random but seeded (the seed is in every failure
message). CheckpointJobTest submits the example's job.yaml to a real stokerd
(STOKER_BIN_DIR) and SIGKILLs its trainer, so that scheduling.maxRetries
runs it again as attempt 2 with STOKER_RESTART_REASON=retry.
test_preemption.py imports STEPS, EVERY, PYTHON, require_torch,
uninterrupted and parse from here.

Run: cd tests/e2e && /usr/bin/python3 -m unittest -v test_checkpoint_example
(about 75 s on 2 cores, each test under 20 s). Needs a Python with torch and
numpy (Debian's python3-torch); without one the trainer tests skip, or fail
under STOKER_TEST_FAIL_ON_SKIP=1 or STOKER_TEST_REQUIRE_ALL=1.
"""
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from harness import SOURCE, StokerTestCase, read_text, skip_or_fail, wait_for

EXAMPLE = os.path.join(SOURCE, "examples", "checkpointing")
sys.path.insert(0, EXAMPLE)
from trainer import checkpoint  # noqa: E402  (no torch in it)

STEPS = 80       # --steps
EVERY = 10       # --checkpoint-every: the most steps a SIGKILL may cost
SLEEP = 0.05     # --sleep-per-step of interrupted runs: 80 steps take > 4 s
KILLS = 2        # interruptions per run, so 3 attempts
TIMEOUT = 120    # for one attempt to end (generous: a loaded CI machine)

STEP_LINE = re.compile(r"^step (\d+) loss (\S+)$")
START_LINE = re.compile(r"^attempt (.+?): (?:resuming from|starting at) step (\d+) of (\d+)")
DIGEST_LINE = re.compile(r"^final weights sha256 ([0-9a-f]{64}) ")


def find_python():
    """A Python that has torch and numpy: this one, else Debian's."""
    for exe in (sys.executable, "/usr/bin/python3"):
        if exe and os.path.exists(exe) and subprocess.run(
                [exe, "-c", "import torch, numpy"], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL).returncode == 0:
            return exe
    return None


PYTHON = find_python()
NO_TORCH = ("no Python with torch and numpy (tried %s and /usr/bin/python3; on Debian: "
            "apt-get install python3-torch)" % sys.executable)


def require_torch(case):
    """Skips `case` without a Python that has torch, or fails it where
    skipping is forbidden (STOKER_TEST_FAIL_ON_SKIP=1, or harness's
    STOKER_TEST_REQUIRE_ALL=1, which CI sets)."""
    if PYTHON is not None:
        return
    if os.environ.get("STOKER_TEST_FAIL_ON_SKIP") == "1":
        case.fail(NO_TORCH + " (STOKER_TEST_FAIL_ON_SKIP=1 forbids skipping)")
    skip_or_fail(case, NO_TORCH)


def trainer_env(ckpt_dir, model_dir, attempt, reason):
    env = dict(os.environ, AIP_CHECKPOINT_DIR=ckpt_dir, AIP_MODEL_DIR=model_dir,
               STOKER_ATTEMPT=str(attempt), PYTHONDONTWRITEBYTECODE="1")
    env.pop("STOKER_RESTART_REASON", None)
    if reason:
        env["STOKER_RESTART_REASON"] = reason
    return env


class Attempt:
    """One trainer process; its output lines (stdout and stderr) collected
    as they come by a reader thread."""

    def __init__(self, ckpt_dir, model_dir, attempt, reason=None, steps=STEPS, sleep=SLEEP,
                 every=EVERY, extra=()):
        argv = [PYTHON or sys.executable, "-m", "trainer.task", "--steps=%d" % steps,
                "--checkpoint-every=%d" % every, "--sleep-per-step=%g" % sleep] + list(extra)
        self.proc = subprocess.Popen(argv, cwd=EXAMPLE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True,
                                     env=trainer_env(ckpt_dir, model_dir, attempt, reason))
        self.lines = []
        self.eof = False
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def steps(self):
        return [int(m.group(1)) for m in map(STEP_LINE.match, self.lines) if m]

    def wait_step(self, step, timeout=TIMEOUT, may_end=False):
        """Waits until the trainer printed step `step` and returns True; fails
        if it ended first, or returns False when `may_end`."""
        with self.cond:
            self.cond.wait_for(lambda: self.eof or any(s >= step for s in self.steps()), timeout)
            if any(s >= step for s in self.steps()):
                return True
            if may_end and self.eof:
                return False
            raise AssertionError("the trainer did not reach step %d; its output:\n%s" %
                                 (step, "\n".join(self.lines[-30:])))

    def finish(self, timeout=TIMEOUT):
        """Waits for the process and its output; returns its return code."""
        rc = self.proc.wait(timeout)
        self.reader.join(timeout)
        self.proc.stdout.close()
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.finish()

    def output(self):
        return "\n".join(self.lines)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)


def parse(lines):
    """(start: (attempt text, from step, of steps) or None, {step: loss
    text} in order, digest or None)."""
    start, losses, digest = None, [], None
    for line in lines:
        m = START_LINE.match(line)
        if m:
            start = (m.group(1), int(m.group(2)), int(m.group(3)))
        m = STEP_LINE.match(line)
        if m:
            losses.append((int(m.group(1)), m.group(2)))
        m = DIGEST_LINE.match(line)
        if m:
            digest = m.group(1)
    return start, losses, digest


class CheckpointStoreTest(unittest.TestCase):
    """trainer/checkpoint.py on its own (no torch)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ckpt-store-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def test_keeps_the_newest_two_and_drops_later_ones(self):
        for step in (10, 20, 30, 40):
            checkpoint.save(self.dir, step, b"state %d" % step)
        self.assertEqual(sorted(os.listdir(self.dir)), ["ckpt-00000030.ckpt", "ckpt-00000040.ckpt"])
        self.assertEqual(checkpoint.read(os.path.join(self.dir, "ckpt-00000040.ckpt")),
                         (40, b"state 40"))
        # Resumed from 30 (say 40 was torn): writing 35 removes 40, keeps 30.
        checkpoint.save(self.dir, 35, b"state 35")
        self.assertEqual(checkpoint.list_steps(self.dir), [35, 30])

    def test_a_torn_file_is_reported_and_an_older_one_used(self):
        checkpoint.save(self.dir, 10, b"ten")
        checkpoint.save(self.dir, 20, b"twenty" * 100)
        path20 = os.path.join(self.dir, "ckpt-00000020.ckpt")
        with open(path20, "r+b") as f:
            f.truncate(os.path.getsize(path20) - 7)
        with self.assertRaisesRegex(ValueError, "header says 600 bytes, the file has 593"):
            checkpoint.read(path20)
        warnings = []
        self.assertEqual(checkpoint.load_newest(self.dir, bytes.upper, warnings.append),
                         (10, os.path.join(self.dir, "ckpt-00000010.ckpt"), b"TEN"))
        self.assertEqual(len(warnings), 1)
        self.assertIn("ignoring checkpoint %s: truncated or torn" % path20, warnings[0])

    def test_changed_bytes_bad_headers_and_decoder_errors_are_skipped(self):
        checkpoint.save(self.dir, 5, b"five")
        checkpoint.save(self.dir, 10, b"payload")
        path = os.path.join(self.dir, "ckpt-00000010.ckpt")
        data = bytearray(read_bytes(path))
        data[-1] ^= 1
        write_bytes(path, bytes(data))
        with self.assertRaisesRegex(ValueError, "torn or corrupt: sha256"):
            checkpoint.read(path)
        write_bytes(os.path.join(self.dir, "ckpt-00000020.ckpt"), b"PK\x03\x04 a zip")
        write_bytes(os.path.join(self.dir, "ckpt-00000030.ckpt"), b"")
        warnings = []

        def decode(payload):
            raise ValueError("not mine")
        self.assertIsNone(checkpoint.load_newest(self.dir, decode, warnings.append))
        self.assertEqual(len(warnings), 4, warnings)
        self.assertIn("no STOKER-CKPT header (0 bytes", warnings[0])
        self.assertIn("ckpt-00000005.ckpt: not mine", warnings[3])

    def test_partial_writes_are_cleaned_and_the_writability_probe_leaves_nothing(self):
        checkpoint.check_writable(os.path.join(self.dir, "new", "dir"))
        self.assertEqual(os.listdir(os.path.join(self.dir, "new", "dir")), [])
        shutil.rmtree(os.path.join(self.dir, "new"))
        write_bytes(os.path.join(self.dir, ".ckpt-00000010.ckpt.tmp-4242"), b"half")
        checkpoint.save(self.dir, 10, b"x")
        self.assertEqual(checkpoint.clean_partial_writes(self.dir), [".ckpt-00000010.ckpt.tmp-4242"])
        self.assertEqual(os.listdir(self.dir), ["ckpt-00000010.ckpt"])
        blocker = os.path.join(self.dir, "ckpt-00000010.ckpt")
        with self.assertRaises(NotADirectoryError):
            checkpoint.check_writable(os.path.join(blocker, "sub"))


def uninterrupted(extra=()):
    """(losses [(step, loss text)], digest) of a run of STEPS steps in a
    fresh directory that nothing interrupts."""
    tmp = tempfile.mkdtemp(prefix="ckpt-ref-")
    try:
        a = Attempt(os.path.join(tmp, "ckpt"), os.path.join(tmp, "model"), 1, sleep=0,
                    extra=extra)
        rc = a.finish()
        if rc != 0:
            raise AssertionError("the uninterrupted run failed (%d):\n%s" % (rc, a.output()))
        _, losses, digest = parse(a.lines)
        with open(os.path.join(tmp, "model", "weights_sha256.txt")) as f:
            written = f.read().strip()
        if digest is None or written != digest or [s for s, _ in losses] != list(
                range(1, STEPS + 1)):
            raise AssertionError("unexpected uninterrupted run:\n" + a.output())
        return losses, digest
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class CheckpointExampleTest(unittest.TestCase):
    """The trainer run as Stoker would run its attempts."""

    reference = None  # uninterrupted() with the default flags

    @classmethod
    def setUpClass(cls):
        if PYTHON is not None:
            cls.reference = uninterrupted()

    def setUp(self):
        require_torch(self)
        self.tmp = tempfile.mkdtemp(prefix="ckpt-example-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.ckpt = os.path.join(self.tmp, "checkpoints")
        self.model = os.path.join(self.tmp, "model")
        self.attempts = []

    def tearDown(self):
        for a in self.attempts:
            a.kill()

    def start(self, attempt, reason=None, **kw):
        a = Attempt(self.ckpt, self.model, attempt, reason, **kw)
        self.attempts.append(a)
        return a

    def assert_same_losses(self, losses, context, reference=None):
        """Every step line, redone ones included, prints exactly the loss of
        the uninterrupted run at that step: the resumed runs are bit-for-bit
        the same computation, not just close."""
        expected = dict((reference or self.reference)[0])
        for step, loss in losses:
            self.assertEqual(loss, expected[step], "step %d differs; %s" % (step, context))

    def assert_final(self, last, context, reference=None, every=EVERY):
        _, _, digest = parse(last.lines)
        self.assertEqual(digest, (reference or self.reference)[1], context)
        with open(os.path.join(self.model, "weights_sha256.txt")) as f:
            self.assertEqual(f.read().strip(), digest)
        self.assertTrue(os.path.getsize(os.path.join(self.model, "model.pt")) > 0)
        # Bounded: the newest two checkpoints, no temp files.
        self.assertEqual(sorted(os.listdir(self.ckpt)),
                         ["ckpt-%08d.ckpt" % (STEPS - every), "ckpt-%08d.ckpt" % STEPS], context)

    def interrupted_run(self, sig, reason, seed):
        """Runs the trainer, sending `sig` at KILLS random points (each
        after a random step of the attempt and a random fraction of a step)
        and restarting it as the next attempt; returns the attempts."""
        rng = random.Random(seed)
        reached = 0
        for n in range(1, KILLS + 2):
            a = self.start(n, reason if n > 1 else None)
            if n <= KILLS:
                # At most 2 checkpoint periods in, so the run never ends first.
                a.wait_step(rng.randint(reached + 1, reached + 2 * EVERY))
                time.sleep(rng.uniform(0, SLEEP))  # picks the instant, not a synchronisation
                a.proc.send_signal(sig)
            rc = a.finish()
            context = "seed %d, attempt %d:\n%s" % (seed, n, a.output()[-3000:])
            self.assertEqual(rc, -sig if n <= KILLS else 0, context)
            start, losses, _ = parse(a.lines)
            self.assertIsNotNone(start, context)
            reached = losses[-1][0] if losses else start[1]
        return self.attempts

    def test_sigkilled_twice_resumes_with_at_most_k_steps_redone_and_the_same_model(self):
        seed = random.randrange(1 << 30)
        attempts = self.interrupted_run(signal.SIGKILL, "retry", seed)
        executed = 0
        for n, a in enumerate(attempts, 1):
            start, losses, _ = parse(a.lines)
            context = "seed %d, attempt %d:\n%s" % (seed, n, a.output()[-3000:])
            executed += len(losses)
            self.assert_same_losses(losses, context)
            if n == 1:
                self.assertEqual(start, ("1", 0, STEPS), context)
                continue
            self.assertEqual(start[0], "%d (restart reason: retry)" % n, context)
            prev = attempts[n - 2]
            prev_steps = prev.steps() or [parse(prev.lines)[0][1]]
            written = [int(m.group(1)) for m in
                       (re.match(r"^checkpoint step (\d+) ", l) for l in prev.lines) if m]
            # Resumed from a checkpoint at least as new as the last one the
            # previous attempt reported, and no newer than its last step...
            self.assertEqual(start[1] % EVERY, 0, context)
            self.assertGreaterEqual(start[1], max(written, default=0), context)
            self.assertLessEqual(start[1], prev_steps[-1], context)
            # ...so this interruption redid at most --checkpoint-every steps.
            self.assertLessEqual(prev_steps[-1] - start[1], EVERY, context)
            self.assertEqual(losses[0][0], start[1] + 1, context)
        self.assertLessEqual(executed - STEPS, KILLS * EVERY, "seed %d" % seed)
        self.assert_final(attempts[-1], "seed %d" % seed)

    def test_sigtermed_twice_checkpoints_the_current_step_and_redoes_nothing(self):
        seed = random.randrange(1 << 30)
        attempts = self.interrupted_run(signal.SIGTERM, "preemption", seed)
        executed = 0
        for n, a in enumerate(attempts, 1):
            start, losses, _ = parse(a.lines)
            context = "seed %d, attempt %d:\n%s" % (seed, n, a.output()[-3000:])
            executed += len(losses)
            self.assert_same_losses(losses, context)
            if n <= KILLS:
                last = losses[-1][0]
                self.assertEqual(a.lines[-1], "SIGTERM: checkpoint of step %d written to %s; "
                                 "stopping (the next attempt resumes there)" %
                                 (last, os.path.join(self.ckpt, "ckpt-%08d.ckpt" % last)), context)
            if n > 1:
                prev_last = parse(attempts[n - 2].lines)[1][-1][0]
                self.assertEqual(start, ("%d (restart reason: preemption)" % n, prev_last, STEPS),
                                 context)
        self.assertEqual(executed, STEPS, "seed %d: a SIGTERM must cost no step" % seed)
        self.assert_final(attempts[-1], "seed %d" % seed)

    def test_sigkills_that_land_in_checkpoint_writes_never_leave_a_torn_checkpoint(self):
        # A checkpoint after every step, made big (a 64k-row data order): most
        # of the run is spent writing checkpoints, so most kills land in one.
        # The atomic write means a resumed attempt never meets a torn file and
        # loses at most the step it was in.
        extra = ["--train-size=65536"]
        reference = uninterrupted(extra)
        seed = random.randrange(1 << 30)
        rng = random.Random(seed)
        previous = None
        for n in range(1, 6):
            a = self.start(n, "retry" if n > 1 else None, sleep=0, every=1, extra=extra)
            # A kill after the last step's checkpoint leaves this attempt
            # only the model to write: then it may end before any step.
            if n < 5 and a.wait_step(1 if previous is None else previous + 1, may_end=True):
                time.sleep(rng.uniform(0, 0.3))  # picks the instant, not a synchronisation
                a.proc.send_signal(signal.SIGKILL)
            rc = a.finish()
            context = "seed %d, attempt %d:\n%s" % (seed, n, a.output()[-3000:])
            self.assertIn(rc, (0, -signal.SIGKILL), context)
            self.assertNotIn("ignoring checkpoint", a.output(), context)
            start, losses, _ = parse(a.lines)
            self.assert_same_losses(losses, context, reference)
            if previous is not None:
                # Killed after printing step S: its checkpoint was written, or
                # the kill came during that write and S-1's is the newest.
                self.assertIn(start[1], (previous - 1, previous), context)
            if rc == 0:
                break
            previous = losses[-1][0] if losses else start[1]
        self.assert_final(a, "seed %d" % seed, reference, every=1)

    def test_a_torn_checkpoint_and_a_partial_write_are_skipped(self):
        # A first attempt that ends at step 30 leaves checkpoints 20 and 30.
        self.assertEqual(self.start(1, steps=30, sleep=0).finish(), 0)
        newest = os.path.join(self.ckpt, "ckpt-00000030.ckpt")
        with open(newest, "r+b") as f:
            f.truncate(os.path.getsize(newest) // 2)  # as if the storage lost its tail
        partial = os.path.join(self.ckpt, ".ckpt-00000040.ckpt.tmp-99999")
        with open(partial, "wb") as f:
            f.write(b"STOKER-CKPT 1 step=40 bytes=")  # a write killed half way
        a = self.start(2, "node_failure", sleep=0)
        self.assertEqual(a.finish(), 0, a.output())
        out = a.output()
        self.assertIn("removed %s: a checkpoint write that an earlier attempt did not finish" %
                      partial, out)
        self.assertIn("ignoring checkpoint %s: truncated or torn" % newest, out)
        start, losses, _ = parse(a.lines)
        self.assertEqual(start, ("2 (restart reason: node_failure)", 20, STEPS), out)
        self.assertEqual(losses[0][0], 21, out)
        self.assert_same_losses(losses, out)
        self.assert_final(a, out)

    def test_with_no_whole_checkpoint_it_starts_over_and_still_agrees(self):
        self.assertEqual(self.start(1, steps=20, sleep=0).finish(), 0)
        for step in (10, 20):  # one with a changed byte, one empty
            path = os.path.join(self.ckpt, "ckpt-%08d.ckpt" % step)
            data = bytearray(read_bytes(path))
            data[len(data) // 2] ^= 0x40
            write_bytes(path, bytes(data) if step == 10 else b"")
        a = self.start(2, "worker_restart", sleep=0)
        self.assertEqual(a.finish(), 0, a.output())
        self.assertIn("ckpt-00000010.ckpt: torn or corrupt: sha256", a.output())
        self.assertIn("ckpt-00000020.ckpt: no STOKER-CKPT header", a.output())
        start, losses, _ = parse(a.lines)
        self.assertEqual(start, ("2 (restart reason: worker_restart)", 0, STEPS), a.output())
        self.assertEqual(len(losses), STEPS)
        self.assert_final(a, a.output())

    def test_a_checkpoint_of_another_configuration_is_refused(self):
        self.assertEqual(self.start(1, steps=10, sleep=0).finish(), 0)
        a = self.start(2, "retry", sleep=0, extra=["--seed=7", "--learning-rate=0.5"])
        self.assertEqual(a.finish(), 2, a.output())
        self.assertIn("ckpt-00000010.ckpt is a checkpoint of another configuration: --seed=7 "
                      "(the checkpoint has 0); --learning-rate=0.5 (the checkpoint has 0.01)",
                      a.output())
        self.assertIn("give this run a checkpoint directory of its own", a.output())
        self.assertNotIn("step 11", a.output())


class CheckpointDirErrorTest(unittest.TestCase):
    """The trainer refuses a checkpoint directory it cannot write before it
    imports torch (so this runs without torch too)."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ckpt-dir-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.model = os.path.join(self.tmp, "model")

    def test_an_unwritable_checkpoint_dir_is_a_clear_error(self):
        # A path under a regular file: unwritable even for root, which
        # permission bits would not stop.
        blocker = os.path.join(self.tmp, "a-file")
        write_bytes(blocker, b"")
        self.ckpt = os.path.join(blocker, "checkpoints")
        a = Attempt(self.ckpt, self.model, 1)
        rc = a.finish()
        out = a.output()
        self.assertEqual(rc, 2, out)
        self.assertIn("error: AIP_CHECKPOINT_DIR=%s is not a directory this trainer can write "
                      "checkpoints to" % self.ckpt, out)
        self.assertIn("Not a directory", out)
        self.assertIn("point AIP_CHECKPOINT_DIR at such a directory", out)
        self.assertIn("is a part of it a regular file", out)
        self.assertNotIn("step 1 ", out)
        self.assertFalse(os.path.exists(self.model))


def trainer_pids(job_id, data_dir):
    """Pids of the `python -m trainer.task` processes of job `job_id` of the
    daemon on `data_dir` (their environment names both)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                argv = f.read().split(b"\0")
            with open("/proc/%s/environ" % entry, "rb") as f:
                environ = f.read().split(b"\0")
        except OSError:
            continue
        if (b"-m" in argv and b"trainer.task" in argv and
                ("CLOUD_ML_JOB_ID=%s" % job_id).encode() in environ and
                any(e.startswith(b"AIP_CHECKPOINT_DIR=" + data_dir.encode()) for e in environ)):
            pids.append(int(entry))
    return pids


class CheckpointJobTest(StokerTestCase):
    """The example's job.yaml through a real stokerd: a job whose trainer is
    SIGKILLed is retried (scheduling.maxRetries), and its second attempt
    resumes from the checkpoint with STOKER_RESTART_REASON=retry and ends
    with the model of a job that ran through."""

    def setUp(self):
        require_torch(self)
        super().setUp()
        self.stoker("storage", "mb", "gs://ckpt")

    def submit_example(self, output, sleep):
        """Submits examples/checkpointing/job.yaml with its outputs under
        gs://ckpt/<output>/ for STEPS steps of `sleep` s; returns the job id."""
        example = os.path.join(SOURCE, "examples", "checkpointing")
        config = self.write(output + ".yaml", read_text(os.path.join(example, "job.yaml")).replace(
            "gs://ckpt/output/", "gs://ckpt/%s/" % output))
        r = self.stoker("jobs", "submit", "--config", config, "--package-path",
                        os.path.join(example, "trainer"), "--module-name", "trainer.task",
                        "--args=--steps=%d,--checkpoint-every=%d,--sleep-per-step=%g" %
                        (STEPS, EVERY, sleep))
        return re.search(r"Submitted job (\d+)", r.stdout).group(1)

    def output(self, output, *parts):
        return os.path.join(self.data, "buckets", "ckpt", output, *parts)

    def test_a_killed_trainer_is_retried_and_resumes_to_the_same_model(self):
        plain = self.submit_example("plain", 0)
        final = self.wait_state(plain, timeout=180)
        self.assertEqual(final["state"], "JOB_STATE_SUCCEEDED", final)
        first_attempt = final["stoker"]["attempt"]  # the API counts from 0
        log = self.stoker("jobs", "logs", plain).stdout
        self.assertEqual(parse(log.splitlines())[0], ("1", 0, STEPS), log)
        expected = read_text(self.output("plain", "model", "weights_sha256.txt")).strip()

        # 0.1 s a step: the test has 6 s to find and kill the trainer after
        # step 2K (the digest does not depend on the sleep).
        job_id = self.submit_example("killed", 2 * SLEEP)
        # Once the trainer has written its checkpoint of step 2K, SIGKILL it:
        # a failure of the user's code as far as Stoker can tell.
        second = self.output("killed", "checkpoints", "ckpt-%08d.ckpt" % (2 * EVERY))
        wait_for(lambda: os.path.exists(second), 120, "the checkpoint of step %d" % (2 * EVERY))
        pids = trainer_pids(job_id, self.data)
        self.assertEqual(len(pids), 1, "the trainer of job %s: %s" % (job_id, pids))
        os.kill(pids[0], signal.SIGKILL)

        final = self.wait_state(job_id, timeout=180)
        self.assertEqual(final["state"], "JOB_STATE_SUCCEEDED", final)
        self.assertEqual(final["stoker"]["attempt"], first_attempt + 1, final)
        self.assertEqual(final["stoker"].get("restartReason"), "retry", final)
        log = self.stoker("jobs", "logs", job_id).stdout  # the last attempt's
        start, losses, digest = parse(log.splitlines())
        self.assertIsNotNone(start, log)
        self.assertEqual(start[0], "2 (restart reason: retry)", log)
        # From the checkpoint seen before the kill, or one written after it.
        self.assertGreaterEqual(start[1], 2 * EVERY, log)
        self.assertEqual(start[1] % EVERY, 0, log)
        self.assertEqual(losses[0][0], start[1] + 1, log)
        self.assertEqual(len(losses), STEPS - start[1], log)
        self.assertEqual(digest, expected, log)
        self.assertEqual(read_text(self.output("killed", "model", "weights_sha256.txt")).strip(),
                         expected)


if __name__ == "__main__":
    unittest.main()
