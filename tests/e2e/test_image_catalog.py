"""The daemon's image catalog (docs/containers.md "How the daemon knows its
images", docs/decisions/0037): with podman installed, submissions and
launches do not run the engine's client; the catalog reads the image list
once and follows the engine's events, so an image built after the daemon
started runs as a container in the next job. Each podman call stokerd makes
is logged by a `podman` wrapper first on stokerd's PATH (the daemon finds
its client on PATH). Needs podman and the base image of
scripts/container-base-image.sh; without them these tests skip (CI, with
STOKER_TEST_REQUIRE_ALL=1, fails instead)."""

import os
import shutil
import subprocess
import tempfile
import unittest

from harness import (BASE_IMAGE, DEFAULT_CONFIG, STOKER, StokerTestCase, container_job, podman,
                     podman_setup_error, read_text, skip_or_fail, wait_for)

BUILT = "localhost/stoker-e2e-catalog/built:%d" % os.getpid()

# Logs "start ARGS" and "end ARGS" around every call; `events` is exec'd so
# that the daemon's cancel reaches podman itself.
WRAPPER = """#!/bin/sh
case "$1" in events) printf 'events %%s\\n' "$*" >> %(log)s; exec %(podman)s "$@";; esac
printf 'start %%s\\n' "$*" >> %(log)s
%(podman)s "$@"
rc=$?
printf 'end %%s\\n' "$*" >> %(log)s
exit $rc
"""

SETUP_ERROR = None


def setUpModule():
    global SETUP_ERROR
    SETUP_ERROR = podman_setup_error()


def tearDownModule():
    if shutil.which("podman"):
        podman("rmi", "--force", BUILT, check=False)


class ImageCatalogTest(StokerTestCase):

    config = DEFAULT_CONFIG + "containers:\n  engine: podman\n"

    def setUp(self):
        if SETUP_ERROR:
            skip_or_fail(self, SETUP_ERROR)
        # The wrapper must be in place before stokerd starts (super().setUp).
        self.bin = tempfile.mkdtemp(prefix="stoker-e2e-catalog-bin-")
        self.addCleanup(shutil.rmtree, self.bin, True)
        self.calls = os.path.join(self.bin, "calls.log")
        with open(os.path.join(self.bin, "podman"), "w") as f:
            f.write(WRAPPER % {"log": self.calls, "podman": shutil.which("podman")})
        os.chmod(os.path.join(self.bin, "podman"), 0o755)
        saved = os.environ["PATH"]
        os.environ["PATH"] = self.bin + ":" + saved
        try:
            super().setUp()
        finally:
            os.environ["PATH"] = saved
        log = os.path.join(self.data, "stokerd.test.log")
        # The engine's list waits for its store's lock, which a build in a
        # test beside this one may hold for long.
        wait_for(lambda: "image catalog: read" in read_text(log), 180, "the catalog's first list")

    def podman_calls(self):
        """The podman command lines stokerd ran (from `start` and `events` lines)."""
        lines = read_text(self.calls).splitlines() if os.path.exists(self.calls) else []
        return [l.split(" ", 1)[1] for l in lines if l.startswith(("start ", "events "))]

    def catalog_only(self, calls):
        return [c for c in calls
                if not c.startswith("image ls --no-trunc") and not c.startswith("events ")]

    def test_submissions_and_launches_run_no_podman(self):
        # The catalog logs its first list, then starts following the events.
        wait_for(lambda: any(c.startswith("events ") for c in self.podman_calls()), 30,
                 "the catalog's events stream")
        calls = self.podman_calls()
        self.assertTrue(any(c.startswith("image ls --no-trunc") for c in calls), calls)
        before = len(calls)
        jobs = [self.submit(container_job("catalog-%d" % i, "true")) for i in range(20)]
        for j in jobs:
            self.assertEqual(self.wait_state(j, timeout=120)["state"], "JOB_STATE_SUCCEEDED")
        during = self.podman_calls()[before:]
        self.assertEqual(self.catalog_only(during), [], during)

    def test_an_image_built_after_start_runs_as_a_container_in_the_next_job(self):
        ctx = os.path.join(self.tmp, "ctx")
        os.makedirs(ctx)
        with open(os.path.join(ctx, "Dockerfile"), "w") as f:
            f.write("FROM %s\nRUN echo built-after-start > /marker\n" % BASE_IMAGE)
        env = dict(os.environ, STOKER_HOME=os.path.join(self.tmp, "no-home"))
        r = subprocess.run([STOKER, "images", "build", "-t", BUILT, ctx], capture_output=True,
                           text=True, env=env, timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr)
        job = {"displayName": "built", "jobSpec": {"workerPoolSpecs": [{
            "machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 1,
            "containerSpec": {"imageUri": BUILT, "command": ["cat", "/marker"]}}]}}
        # Submitted at once: should the build's event not have reached the
        # catalog yet, the daemon asks podman before refusing the name.
        first = self.submit(job)
        self.assertEqual(self.wait_state(first, timeout=120)["state"], "JOB_STATE_SUCCEEDED")
        self.assertIn("built-after-start", self.stoker("jobs", "logs", first).stdout)
        events = [e["reason"] for e in
                  self.api("GET", self.project_path + "/" + first + "/events")[1]["events"]]
        self.assertTrue(any("runs in a container" in e and BUILT in e for e in events), events)

        # The event stream brought it into the catalog, without a restart:
        # the next job's submission and launch ask podman nothing.
        log = os.path.join(self.data, "stokerd.test.log")
        wait_for(lambda: "image catalog: now has " + BUILT in read_text(log), 30,
                 "the catalog to see the built image")
        before = len(self.podman_calls())
        second = self.submit(job)
        self.assertEqual(self.wait_state(second, timeout=120)["state"], "JOB_STATE_SUCCEEDED")
        during = self.podman_calls()[before:]
        self.assertFalse([c for c in during if c.startswith("image exists")], during)


if __name__ == "__main__":
    unittest.main()
