"""`stoker gsutil ...`: the gsutil command lines of public Vertex AI / AI
Platform tutorials against the local buckets, with gsutil's outcomes and exit
codes; resumed uploads; checksums; a large streamed round trip in bounded
memory. Real stokerd, real CLI."""
import hashlib
import os
import pathlib
import signal
import subprocess
import time
import unittest

from harness import STOKER, StokerTestCase, wait_for


def vm_hwm_kib(pid):
    """The peak resident memory of process `pid` (VmHWM), in KiB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM for %d" % pid)


def pattern_bytes(n, seed=0):
    """`n` deterministic, incompressible-looking bytes."""
    out = bytearray()
    block = hashlib.sha256(str(seed).encode()).digest()
    while len(out) < n:
        block = hashlib.sha256(block).digest()
        out += block * 64
    return bytes(out[:n])


class GsutilTest(StokerTestCase):

    def gsutil(self, *args, **kw):
        return self.stoker("gsutil", *args, **kw)

    def cli_env(self):
        env = dict(os.environ)
        env.pop("STOKER_SERVER", None)
        env["STOKER_HOME"] = os.path.join(self.tmp, "no-home")
        env["STOKER_TOKEN"] = self.daemon.token
        return env

    def cli(self, *args):
        return [STOKER, "--server", self.daemon.url, "--project", "p", "--region", "l"] + list(args)

    def make_data(self):
        data = os.path.join(self.tmp, "work", "data")  # self.data is the daemon's
        os.makedirs(os.path.join(data, "sub"))
        for i in range(3):
            pathlib.Path(data, "taxi-train-%d.csv" % i).write_text("fare,tips\n%d,1\n" % i)
        pathlib.Path(data, "taxi-valid.csv").write_text("fare,tips\n9,9\n")
        pathlib.Path(data, "sub", "deep.bin").write_bytes(pattern_bytes(100000))
        return data

    def test_the_tutorial_command_lines(self):
        bucket = "gs://my-vertex-bucket"
        r = self.gsutil("mb", bucket)
        self.assertIn("Creating gs://my-vertex-bucket/", r.stdout)
        # mb of an existing bucket fails as gsutil does.
        r = self.gsutil("mb", bucket, check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("409", r.stderr)
        self.assertIn("already exists", r.stderr)

        data = self.make_data()
        # A directory without -r is omitted, exit 1, nothing copied.
        r = self.gsutil("cp", data, bucket + "/data", check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("Did you mean to do cp -r", r.stderr)
        self.assertEqual(self.gsutil("ls", bucket).stdout, "")

        self.gsutil("cp", "-r", data, bucket + "/data")
        listing = self.gsutil("ls", bucket + "/data/taxi-train*").stdout.split()
        self.assertEqual(listing, ["%s/data/taxi-train-%d.csv" % (bucket, i) for i in range(3)])
        # ls of a prefix shows its "directories"; -r everything; ** crosses '/'.
        top = self.gsutil("ls", bucket + "/data").stdout.split()
        self.assertIn(bucket + "/data/sub/", top)
        self.assertNotIn(bucket + "/data/sub/deep.bin", top)
        self.assertIn(bucket + "/data/sub/deep.bin", self.gsutil("ls", "-r", bucket).stdout)
        self.assertEqual(self.gsutil("ls", bucket + "/**.bin").stdout.split(),
                         [bucket + "/data/sub/deep.bin"])
        self.assertEqual(self.gsutil("ls", bucket + "/data/taxi-?alid.csv").stdout.split(),
                         [bucket + "/data/taxi-valid.csv"])
        long = self.gsutil("ls", "-l", bucket + "/data/taxi-valid.csv").stdout
        self.assertIn("TOTAL: 1 objects, 14 bytes", long)

        # -m cp of a local wildcard into a "directory".
        self.gsutil("-m", "cp", os.path.join(data, "taxi-train*"), bucket + "/copy/")
        self.assertEqual(len(self.gsutil("ls", bucket + "/copy/").stdout.split()), 3)

        self.assertEqual(self.gsutil("cat", bucket + "/data/taxi-valid.csv").stdout,
                         "fare,tips\n9,9\n")
        du = self.gsutil("du", "-s", bucket + "/data").stdout.split()
        self.assertEqual(du, [str(3 * 14 + 14 + 100000), bucket + "/data"])
        self.assertIn("KiB", self.gsutil("du", "-sh", bucket).stdout)

        # Down again: a prefix into a new directory, one object to a file.
        back = os.path.join(self.tmp, "back")
        self.gsutil("cp", "-r", bucket + "/data", back)
        self.assertEqual(pathlib.Path(back, "sub", "deep.bin").read_bytes(), pattern_bytes(100000))
        one = os.path.join(self.tmp, "one.csv")
        self.gsutil("cp", bucket + "/data/taxi-train-1.csv", one)
        self.assertEqual(pathlib.Path(one).read_text(), "fare,tips\n1,1\n")

        # What matches nothing: gsutil's message, exit 1.
        r = self.gsutil("ls", bucket + "/nothing*", check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("CommandException", r.stderr)
        r = self.gsutil("cp", bucket + "/absent.csv", one, check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("No URLs matched: %s/absent.csv" % bucket, r.stderr)
        r = self.gsutil("cat", "gs://no-such-bucket/x", check=False)
        self.assertEqual(r.returncode, 1)

        # rm of a prefix needs -r; rm -r of the bucket removes it too.
        r = self.gsutil("rm", bucket + "/copy", check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("rm -r", r.stderr)
        self.gsutil("rm", bucket + "/copy/taxi-train-0.csv")
        self.assertEqual(len(self.gsutil("ls", bucket + "/copy/").stdout.split()), 2)
        self.gsutil("rm", "-r", bucket)
        self.assertNotIn("my-vertex-bucket", self.gsutil("ls").stdout)

    def test_unknown_flags_and_bad_urls_are_named(self):
        r = self.gsutil("cp", "--bogus", "a", "gs://b/a", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--bogus", r.stderr)
        r = self.gsutil("ls", "gs://Bad_Bucket", check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("bucket name", r.stderr)

    def test_stdin_up_and_cat_down_and_storage_spellings(self):
        r = subprocess.run(self.cli("gsutil", "cp", "-", "gs://pipes/from-stdin.txt"),
                           input=b"piped bytes\n", capture_output=True, env=self.cli_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.stoker("storage", "cat", "gs://pipes/from-stdin.txt").stdout,
                         "piped bytes\n")
        self.stoker("storage", "buckets", "create", "gs://made-by-gcloud")
        self.assertIn("gs://made-by-gcloud/", self.stoker("storage", "ls").stdout)
        # Objects report crc32c and md5Hash as Cloud Storage's JSON does.
        status, obj = self.api("GET", "/storage/v1/b/pipes/o/from-stdin.txt")
        self.assertEqual(status, 200)
        self.assertEqual(obj["size"], "12")
        import base64
        self.assertEqual(obj["md5Hash"],
                         base64.b64encode(hashlib.md5(b"piped bytes\n").digest()).decode())
        self.assertIn("crc32c", obj)

    def test_progress_is_shown_on_a_terminal_only(self):
        import pty
        src = os.path.join(self.tmp, "p.bin")
        pathlib.Path(src).write_bytes(pattern_bytes(3 << 20))
        master, slave = pty.openpty()
        p = subprocess.Popen(self.cli("gsutil", "cp", src, "gs://prog/p.bin"),
                             stdout=subprocess.DEVNULL, stderr=slave, env=self.cli_env())
        os.close(slave)
        out = b""
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the terminal's other end is closed
                break
            if not data:
                break
            out += data
        os.close(master)
        self.assertEqual(p.wait(), 0)
        text = out.decode(errors="replace")
        self.assertIn("[1/1 files]", text)
        self.assertIn("3.00 MiB/", text)
        self.assertIn("ETA", text)
        self.assertIn("\r", text)  # refreshed in place
        # Not a terminal: no progress; -q: not even the summary.
        r = self.gsutil("cp", src, "gs://prog/q.bin")
        self.assertNotIn("ETA", r.stderr)
        self.assertEqual(self.gsutil("-q", "cp", src, "gs://prog/r.bin").stderr, "")

    def test_package_staging_is_not_capped_at_256_mib(self):
        # 300 MiB that is not an archive: refused for what it is (400), not
        # for its size (413) as before, since the body streams to disk.
        status, body = self.api("POST", "/v1/stoker/staging", raw=b"\0" * (300 << 20))
        self.assertEqual(status, 400, body)
        self.assertIn("gzip", body["error"]["message"])
        self.assertEqual(os.listdir(os.path.join(self.data, "staging")), [])

    def test_rsync_copies_what_differs_and_deletes_with_d(self):
        data = self.make_data()
        self.gsutil("mb", "gs://sync")
        self.gsutil("-m", "rsync", "-r", data, "gs://sync/data")
        self.assertEqual(len(self.gsutil("ls", "-r", "gs://sync/data").stdout.split()), 5)
        pathlib.Path(data, "taxi-valid.csv").write_text("changed\n")
        os.unlink(os.path.join(data, "taxi-train-2.csv"))
        r = self.gsutil("rsync", "-r", "-d", data, "gs://sync/data")
        self.assertIn("Copying file://" + os.path.join(data, "taxi-valid.csv"), r.stderr)
        self.assertIn("Removing gs://sync/data/taxi-train-2.csv", r.stderr)
        self.assertNotIn("taxi-train-0", r.stderr)  # unchanged: not sent again
        self.assertEqual(self.gsutil("cat", "gs://sync/data/taxi-valid.csv").stdout, "changed\n")
        back = os.path.join(self.tmp, "synced")
        self.gsutil("rsync", "-r", "gs://sync/data", back)
        self.assertEqual(sorted(os.listdir(back)), ["sub", "taxi-train-0.csv", "taxi-train-1.csv",
                                                    "taxi-valid.csv"])

    def test_a_corrupt_download_fails_and_is_removed(self):
        self.gsutil("cp", self.write("good.txt", "good bytes"), "gs://sums/f.txt")
        path = os.path.join(self.data, "buckets", "sums", "f.txt")
        st = os.stat(path)
        # Flip bytes behind the daemon's back, keeping size and time, so the
        # checksum it kept from the upload no longer matches the bytes.
        with open(path, "r+b") as f:
            f.write(b"BAD")
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        out = os.path.join(self.tmp, "f.txt")
        r = self.gsutil("cp", "gs://sums/f.txt", out, check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("checksum mismatch", r.stderr)
        self.assertFalse(os.path.exists(out))
        self.assertFalse(os.path.exists(out + "_.gstmp"))

    def test_an_interrupted_upload_resumes_where_it_stopped(self):
        size = 96 << 20
        big = os.path.join(self.tmp, "big.bin")
        with open(big, "wb") as f:
            f.write(pattern_bytes(size, seed=7))
        uploads = os.path.join(self.data, "uploads")

        def received():
            try:
                return max((os.path.getsize(os.path.join(uploads, n))
                            for n in os.listdir(uploads) if n.endswith(".part")), default=0)
            except OSError:
                return 0

        # Kill the CLI mid-transfer (as Ctrl-C would), once some bytes are in.
        p = subprocess.Popen(self.cli("gsutil", "cp", big, "gs://resume/big.bin"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.cli_env())
        wait_for(lambda: received() >= 16 << 20 or p.poll() is not None, 60, "upload progress")
        p.send_signal(signal.SIGKILL)
        p.communicate()
        first = received()
        self.assertGreater(first, 0)
        self.assertLess(first, size, "the upload finished before it could be interrupted")
        # Nothing partial is visible as the object.
        r = self.gsutil("ls", "gs://resume/big.bin", check=False)
        self.assertEqual(r.returncode, 1)

        # Kill -9 the daemon too, then start it again on the same data dir
        # (another port): the session is on disk.
        self.daemon.kill(signal.SIGKILL)
        self.daemon.start()
        r = self.gsutil("cp", big, "gs://resume/big.bin")
        self.assertRegex(r.stderr, r"Resuming upload of .*big.bin at byte \d+")
        resumed_at = int(r.stderr.split(" at byte ")[1].split()[0])
        # The second run sent fewer bytes: it resumed at least where the CLI
        # was killed (the daemon may have kept a piece still in flight then).
        self.assertGreaterEqual(resumed_at, first)
        self.assertLess(resumed_at, size)
        digest = hashlib.md5(pattern_bytes(size, seed=7)).hexdigest()
        cat = subprocess.run(self.cli("gsutil", "cat", "gs://resume/big.bin"),
                             capture_output=True, env=self.cli_env())
        self.assertEqual(cat.returncode, 0, cat.stderr)
        self.assertEqual(hashlib.md5(cat.stdout).hexdigest(), digest)
        self.assertEqual(os.listdir(uploads), [])  # the session is gone
        tracker_dir = os.path.join(self.tmp, "no-home", "tracker-files")
        self.assertEqual(os.listdir(tracker_dir) if os.path.isdir(tracker_dir) else [], [])

    def test_an_interrupted_download_continues_its_temp_file(self):
        size = 40 << 20
        body = pattern_bytes(size, seed=3)
        src = os.path.join(self.tmp, "src.bin")
        pathlib.Path(src).write_bytes(body)
        self.gsutil("cp", src, "gs://down/obj.bin")
        out = os.path.join(self.tmp, "out.bin")
        # A previous run that stopped half-way left this behind.
        pathlib.Path(out + "_.gstmp").write_bytes(body[: size // 2])
        tracker = os.path.join(self.tmp, "no-home", "tracker-files")
        os.makedirs(tracker, exist_ok=True)
        # Without a tracker that names the object's checksum the temp file
        # is not trusted: first run writes the tracker and the whole file.
        self.gsutil("cp", "gs://down/obj.bin", out)
        self.assertEqual(hashlib.md5(pathlib.Path(out).read_bytes()).digest(),
                         hashlib.md5(body).digest())
        self.assertFalse(os.path.exists(out + "_.gstmp"))


class BigTransferTest(StokerTestCase):
    """1.5 GiB streamed from stdin and read back with cat, through hashes:
    one copy on disk, and neither process's memory grows with the size."""

    SIZE = int(os.environ.get("STOKER_BIG_TRANSFER_BYTES", 3 << 29))  # 1.5 GiB

    def test_a_big_object_streams_both_ways_in_bounded_memory(self):
        env = dict(os.environ)
        env.pop("STOKER_SERVER", None)
        env["STOKER_HOME"] = os.path.join(self.tmp, "no-home")
        env["STOKER_TOKEN"] = self.daemon.token
        base = [STOKER, "--server", self.daemon.url, "--project", "p", "--region", "l", "gsutil",
                "-q"]
        block = pattern_bytes(1 << 20, seed=11)
        up_hash = hashlib.md5()
        p = subprocess.Popen(base + ["cp", "-", "gs://big/stream.bin"], stdin=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env)
        sent = 0
        while sent < self.SIZE:
            piece = block[: min(len(block), self.SIZE - sent)]
            try:
                p.stdin.write(piece)
            except BrokenPipeError:  # the CLI stopped reading: say why
                p.wait()
                self.fail("stoker gsutil cp - exited %s after %d bytes:\n%s"
                          % (p.returncode, sent, p.stderr.read().decode()))
            up_hash.update(piece)
            sent += len(piece)
        p.stdin.close()
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        err = p.stderr.read().decode()
        p.stderr.close()
        self.assertEqual(p.returncode, 0, err)
        up_rss_kib = usage.ru_maxrss

        down_hash = hashlib.md5()
        q = subprocess.Popen(base + ["cat", "gs://big/stream.bin"], stdout=subprocess.PIPE,
                             env=env)
        got = 0
        while True:
            chunk = q.stdout.read(1 << 20)
            if not chunk:
                break
            down_hash.update(chunk)
            got += len(chunk)
        q.stdout.close()
        _, status, usage = os.wait4(q.pid, 0)
        q.returncode = os.waitstatus_to_exitcode(status)
        self.assertEqual(q.returncode, 0)
        self.assertEqual(got, self.SIZE)
        self.assertEqual(down_hash.hexdigest(), up_hash.hexdigest())
        daemon_kib = vm_hwm_kib(self.daemon.proc.pid)
        print("\n%d MiB: stokerd VmHWM %d MiB, CLI max RSS up %d MiB, down %d MiB" % (
            self.SIZE >> 20, daemon_kib >> 10, up_rss_kib >> 10, usage.ru_maxrss >> 10))
        if os.environ.get("STOKER_SANITIZED") == "1":
            # ASan keeps 256 MiB of freed blocks in quarantine, so resident
            # size says nothing here; the optimised run of this same test
            # (.ci/run's first stage, at 1.5 GiB) checks the bounds.
            print("under a sanitizer: memory bounds not checked, contents were")
            return
        # Far below the object's size: the bytes never sit in memory.
        self.assertLess(daemon_kib, 256 << 10)
        self.assertLess(up_rss_kib, 256 << 10)
        self.assertLess(usage.ru_maxrss, 256 << 10)


if __name__ == "__main__":
    unittest.main()
