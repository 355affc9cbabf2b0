"""`stoker images build|list|import|load|rm` (docs/images.md) against the real
podman of this machine: a Dockerfile with ARG, RUN, COPY and ENTRYPOINT built
and run, listed as a table and as JSON, removed; a failing step and a missing
FROM image with the engine's words and exit code; paths checked before the
engine runs; `podman save` archives loaded and `podman export` tarballs
imported; the error when no engine may be used. Needs podman (with runc) and
the base image of scripts/container-base-image.sh; without them the podman
tests skip (CI, with STOKER_TEST_REQUIRE_ALL=1, fails instead). The CLI needs
no daemon for these commands."""

import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import textwrap
import threading
import unittest

from harness import (BASE_IMAGE, STOKER, podman, podman_flags, podman_setup_error,
                     skip_or_fail)

BASE = BASE_IMAGE
PREFIX = "localhost/stoker-e2e-images/"
PID = os.getpid()

DOCKERFILE = textwrap.dedent('''
    FROM %s
    ARG GREETING=unset
    RUN echo "$GREETING from a RUN step" > /greeting.txt
    COPY hello.sh /hello.sh
    ENTRYPOINT ["/bin/sh", "/hello.sh"]
''' % BASE)

HELLO = 'cat /greeting.txt; echo "entrypoint args: $*"\n'


run_flags = podman_flags


def image_exists(image):
    return podman("image", "exists", image, check=False).returncode == 0


SETUP_ERROR = None


def setUpModule():
    global SETUP_ERROR
    SETUP_ERROR = podman_setup_error()


class ImagesTestBase(unittest.TestCase):
    """Runs the CLI with a STOKER_HOME of its own (config.yaml from
    `config`) and removes every image named with `image()`."""

    config = ""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stoker-e2e-images-")
        self.home = os.path.join(self.tmp, "home")
        os.makedirs(self.home)
        with open(os.path.join(self.home, "config.yaml"), "w") as f:
            f.write(self.config)
        self.images = []

    def tearDown(self):
        if self.images and shutil.which("podman"):
            podman("rmi", "--force", *self.images, check=False)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def image(self, what):
        name = "%s%s:%d" % (PREFIX, what, PID)
        self.images.append(name)
        return name

    def stoker(self, *args, cwd=None, timeout=600):
        env = dict(os.environ)
        env.pop("STOKER_SERVER", None)
        env["STOKER_HOME"] = self.home
        return subprocess.run([STOKER] + list(args), capture_output=True, text=True, env=env,
                              cwd=cwd, timeout=timeout)

    def write(self, rel, text):
        path = os.path.join(self.tmp, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path


class PodmanImagesTest(ImagesTestBase):

    def setUp(self):
        if SETUP_ERROR:
            skip_or_fail(self, SETUP_ERROR)
        super().setUp()

    def listed(self, *extra):
        r = self.stoker("images", "list", *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def listed_json(self, *where):
        out = self.listed(*where) if where else self.listed("--format", "json")
        return {i["name"]: i for i in json.loads(out)}

    def test_list_while_another_process_removes_images(self):
        # podman's own listing fails when an image disappears under it
        # ("image not known", podman issue #24800); a proof run hit it while
        # another test removed its images. `stoker images list` asks again.
        ctx = os.path.dirname(self.write("churn/Dockerfile", "FROM %s\nLABEL churn=1\n" % BASE))
        stop = threading.Event()
        churned = []

        def churn():
            k = 0
            while not stop.is_set():
                name = self.image("churn%d" % k)
                with open(os.path.join(ctx, "Dockerfile"), "w") as f:
                    f.write("FROM %s\nLABEL churn=%d-%d\n" % (BASE, PID, k))
                podman("build", "-q", "-t", name, ctx, check=False)
                podman("rmi", "--force", name, check=False)
                churned.append(name)
                k += 1
                stop.wait(0.3)
        worker = threading.Thread(target=churn)
        worker.start()
        try:
            for _ in range(12):
                r = self.stoker("images", "list", "--format", "json")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn(BASE, {i["name"] for i in json.loads(r.stdout)})
        finally:
            stop.set()
            worker.join()
        self.assertGreater(len(churned), 0)

    def test_build_run_list_and_remove(self):
        image = self.image("hello")
        ctx = os.path.dirname(self.write("ctx/Dockerfile", DOCKERFILE))
        self.write("ctx/hello.sh", HELLO)
        r = self.stoker("images", "build", "-t", image, "--build-arg", "GREETING=hi there", ctx)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # The engine's own output streams through, then one line of ours.
        self.assertIn("STEP 3/5: RUN", r.stdout)
        last = r.stdout.strip().splitlines()[-1]
        self.assertRegex(last, r"^Built %s in \d+\.\d s \(podman\)$" % re.escape(image))
        self.assertTrue(image_exists(image))

        # The RUN step's file and the ENTRYPOINT are in the image.
        ran = podman("run", "--rm", *run_flags(), image, "a1", "a2", check=False)
        self.assertEqual(ran.returncode, 0, ran.stderr)
        self.assertEqual(ran.stdout, "hi there from a RUN step\nentrypoint args: a1 a2\n")

        table = self.listed()
        self.assertRegex(table.splitlines()[0], r"^NAME +ID +SIZE +CREATED$")
        row = [l for l in table.splitlines() if l.startswith(image + " ")]
        self.assertEqual(len(row), 1, table)
        image_id = podman("image", "inspect", "--format", "{{.Id}}", image).stdout.strip()
        self.assertIn(" " + image_id[:12] + " ", row[0])
        self.assertRegex(row[0], r" \d+(\.\d+)? [kMG]B +(\d+\.\ds|\d+m\d\ds) ago$")

        # --format json: after the command, and as a global flag before it.
        for entries in (self.listed_json(), {i["name"]: i for i in json.loads(
                self.stoker("--format", "json", "images", "list").stdout)}):
            entry = entries[image]
            self.assertEqual(sorted(entry), ["created", "id", "name", "size"])
            self.assertEqual(entry["id"], image_id)
            self.assertIsInstance(entry["size"], int)
            self.assertGreater(entry["size"], 1000000)
            self.assertRegex(entry["created"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
            self.assertIn(BASE, entries)
        # The CLI's other formats work on the same records.
        names = self.listed("--format", "value(name)").split()
        self.assertIn(image, names)

        r = self.stoker("images", "rm", image)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(image_exists(image))
        self.assertNotIn(image, self.listed_json())
        self.assertTrue(image_exists(BASE))

        # Removing it again: the engine's words and its exit code.
        r = self.stoker("images", "rm", image)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("image not known", r.stderr)
        self.assertIn("ERROR: podman rmi exited with 1", r.stderr)

    def test_a_failing_step_fails_with_the_engines_words_and_code(self):
        image = self.image("broken")
        ctx = os.path.dirname(self.write("ctx/Dockerfile.bad", "FROM %s\nRUN echo about to fail "
                                         "&& exit 7\n" % BASE))
        r = self.stoker("images", "build", "-t", image, "-f", "Dockerfile.bad", ".", cwd=ctx)
        self.assertEqual(r.returncode, 7, r.stdout + r.stderr)
        self.assertIn("about to fail", r.stdout)
        self.assertIn('Error: building at STEP "RUN echo about to fail', r.stderr)
        self.assertIn("ERROR: podman build exited with 7: a step of Dockerfile.bad failed "
                      "with exit code 7; its output is above", r.stderr)
        self.assertNotIn("Built ", r.stdout)
        self.assertFalse(image_exists(image))

        # A line podman cannot read: podman's own code (125) and what to check.
        self.write("ctx/Dockerfile", "FROOM %s\n" % BASE)
        r = self.stoker("images", "build", "-t", image, ctx)
        self.assertEqual(r.returncode, 125, r.stdout + r.stderr)
        self.assertIn("Error: ", r.stderr)
        self.assertIn("ERROR: podman build exited with 125: podman stopped outside the steps",
                      r.stderr)
        self.assertFalse(image_exists(image))

    def test_paths_are_checked_before_the_engine_runs(self):
        ctx = os.path.dirname(self.write("ctx/notes.txt", "no Dockerfile here\n"))
        missing = os.path.join(self.tmp, "missing")
        cases = [
            (["build", "-t", self.image("x"), missing], "ERROR: DIR: %s does not exist" % missing),
            (["build", "-t", self.image("x"), "-f", "nope/Dockerfile", ctx],
             "ERROR: -f: nope/Dockerfile does not exist (relative to %s)" % self.tmp),
            (["build", "-t", self.image("x"), ctx],
             "ERROR: DIR: %s holds no Dockerfile (nor Containerfile)" % ctx),
            (["build", "-t", self.image("x"), os.path.join(ctx, "notes.txt")],
             "is not a directory"),
            (["import", missing, self.image("x")], "ERROR: FILE: %s does not exist" % missing),
            (["load", "-i", missing], "ERROR: -i: %s does not exist" % missing),
            (["load", "-i", ctx], "is a directory; give a file"),
        ]
        for args, words in cases:
            with self.subTest(args=args):
                r = self.stoker("images", *args, cwd=self.tmp)
                self.assertNotEqual(r.returncode, 0)
                self.assertIn(words, r.stderr)
                self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
                self.assertEqual(r.stdout, "")

    def test_import_a_root_file_system_and_load_a_saved_archive(self):
        # A root file system of one file, as mmdebstrap would write a larger one.
        rootfs = os.path.join(self.tmp, "rootfs.tar")
        with tarfile.open(rootfs, "w") as tar:
            data = b"from a tarball\n"
            info = tarfile.TarInfo("etc/hello.txt")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        imported = self.image("imported")
        r = self.stoker("images", "import", "--change", 'CMD ["/etc/hello.txt"]', rootfs, imported)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.strip().splitlines()[-1],
                         "Imported %s as %s (podman)" % (rootfs, imported))
        cmd = podman("image", "inspect", "--format", "{{json .Config.Cmd}}", imported).stdout
        self.assertEqual(json.loads(cmd), ["/etc/hello.txt"])
        self.assertIn(imported, self.listed_json())

        # `podman export` of a container made from it: a tarball for import.
        container = "stoker-e2e-images-%d" % PID
        podman("create", "--name", container, imported)
        try:
            exported = os.path.join(self.tmp, "exported.tar")
            podman("export", "-o", exported, container)
        finally:
            podman("rm", "--force", container, check=False)
        reimported = self.image("reimported")
        r = self.stoker("images", "import", exported, reimported)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertTrue(image_exists(reimported))

        # `podman save`, the image removed, then loaded back from the archive.
        archive = os.path.join(self.tmp, "saved.tar")
        podman("save", "-o", archive, reimported)
        self.assertEqual(self.stoker("images", "rm", reimported).returncode, 0)
        self.assertFalse(image_exists(reimported))
        r = self.stoker("images", "load", "-i", archive)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(reimported, r.stdout)
        self.assertTrue(image_exists(reimported))
        # What was loaded holds the tarball's file.
        podman("create", "--name", container, reimported, "/x")
        try:
            listing = subprocess.run(["podman", "export", container], capture_output=True,
                                     check=True).stdout
        finally:
            podman("rm", "--force", container, check=False)
        with tarfile.open(fileobj=io.BytesIO(listing)) as tar:
            self.assertEqual(tar.extractfile("etc/hello.txt").read(), b"from a tarball\n")

        # A file that is no archive: the engine's words and its code.
        junk = self.write("junk.tar", "not an archive\n")
        r = self.stoker("images", "load", "-i", junk)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ERROR: podman load exited with %d" % r.returncode, r.stderr)

    def test_help_says_where_the_engine_runs(self):
        r = self.stoker("images", "--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("where this CLI runs", r.stdout)
        self.assertIn("not through --server", r.stdout)


class NoEngineTest(ImagesTestBase):
    """No daemon and no podman needed: the CLI refuses before any engine runs."""

    config = "containers: {engine: none}\n"

    def test_engine_none_is_one_line_naming_the_setting_and_the_fix(self):
        ctx = os.path.dirname(self.write("ctx/Dockerfile", "FROM %s\n" % BASE))
        config = os.path.join(self.home, "config.yaml")
        for args in (["list"], ["build", "-t", "localhost/x:1", ctx], ["rm", "localhost/x:1"]):
            with self.subTest(args=args):
                r = self.stoker("images", *args)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertEqual(r.stderr, "ERROR: no container engine: containers.engine is none "
                                 "in %s; set containers: {engine: auto} (or podman, docker) "
                                 "there\n" % config)
                self.assertEqual(r.stdout, "")

    def test_a_named_engine_that_cannot_run_says_why(self):
        # docker is either not installed or, with DOCKER_HOST at a socket
        # nobody serves, does not answer: either way the reason is named.
        with open(os.path.join(self.home, "config.yaml"), "w") as f:
            f.write("containers: {engine: docker}\n")
        env = dict(os.environ, STOKER_HOME=self.home,
                   DOCKER_HOST="unix://" + os.path.join(self.tmp, "nobody.sock"))
        env.pop("STOKER_SERVER", None)
        r = subprocess.run([STOKER, "images", "list"], capture_output=True, text=True, env=env,
                           timeout=120)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertRegex(r.stderr, r"^ERROR: containers.engine: docker cannot be used: "
                         r"(docker is not installed|`\S*docker [a-z ]+` failed: .*nobody\.sock)")
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

if __name__ == "__main__":
    unittest.main()
