"""Local buckets behind gs:// through the API."""
import os
import pathlib

from harness import StokerTestCase, container_job, read_text


class StorageTest(StokerTestCase):

    def test_copy_a_directory_up_list_it_and_copy_it_back(self):
        src = os.path.join(self.tmp, "src")
        os.makedirs(os.path.join(src, "sub"))
        open(os.path.join(src, "a.txt"), "w").write("alpha")
        open(os.path.join(src, "sub", "b.bin"), "wb").write(bytes(range(256)) * 100)
        r = self.stoker("storage", "cp", src, "gs://data/set")
        self.assertIn("Copied 2 file(s)", r.stdout)
        listing = self.stoker("storage", "ls", "gs://data/set").stdout
        self.assertIn("gs://data/set/a.txt", listing)
        self.assertIn("gs://data/set/sub/b.bin", listing)
        self.assertIn("gs://data/", self.stoker("storage", "ls").stdout)
        back = os.path.join(self.tmp, "back")
        self.stoker("storage", "cp", "gs://data/set", back)
        self.assertEqual(read_text(os.path.join(back, "a.txt")), "alpha")
        self.assertEqual(pathlib.Path(back, "sub", "b.bin").read_bytes(), bytes(range(256)) * 100)
        # The bytes sit in the bucket directory under the data dir.
        self.assertTrue(os.path.exists(os.path.join(self.data, "buckets", "data", "set", "sub", "b.bin")))

    def test_copy_single_files_both_ways(self):
        f = self.write("model.txt", "weights")
        self.stoker("storage", "cp", f, "gs://mdl/models/")
        self.stoker("storage", "cp", f, "gs://mdl/renamed.txt")
        out = os.path.join(self.tmp, "out.txt")
        self.stoker("storage", "cp", "gs://mdl/models/model.txt", out)
        self.assertEqual(read_text(out), "weights")
        self.assertIn("gs://mdl/renamed.txt", self.stoker("storage", "ls", "gs://mdl/").stdout)

    def test_missing_things_are_errors(self):
        r = self.stoker("storage", "cp", "gs://nope/x", os.path.join(self.tmp, "x"), check=False)
        self.assertEqual(r.returncode, 3)
        r = self.stoker("storage", "cp", os.path.join(self.tmp, "absent"), "gs://b/x", check=False)
        self.assertEqual(r.returncode, 2)
        self.stoker("storage", "mb", "gs://made")
        r = self.stoker("storage", "mb", "gs://made", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("already exists", r.stderr)


class GcsInRootTrainersTest(StokerTestCase):
    """A root trainer (default_unix_user: root) is never isolated, but still
    finds the buckets at /gcs, in a mount namespace of its own."""

    def test_a_root_trainer_reads_and_writes_buckets_at_gcs(self):
        if os.geteuid() != 0:
            self.skipTest("root trainers need a root daemon")
        src = os.path.join(self.tmp, "in.txt")
        with open(src, "w") as f:
            f.write("from-the-bucket\n")
        self.stoker("storage", "cp", src, "gs://rootdata/in.txt")
        j = self.submit(container_job("gcs-root", "cat /gcs/rootdata/in.txt && "
                                      "echo from-root > /gcs/rootdata/out.txt"))
        final = self.wait_state(j)
        log = read_text(os.path.join(self.replica_dir(j), "output.log"))
        self.assertEqual(final["state"], "JOB_STATE_SUCCEEDED", log)
        self.assertIn("from-the-bucket", log)
        self.assertEqual(read_text(os.path.join(self.data, "buckets", "rootdata", "out.txt")),
                         "from-root\n")
        self.assertEqual(os.listdir("/gcs"), [])  # the host's mount point stays empty


if __name__ == "__main__":
    import unittest
    unittest.main()
