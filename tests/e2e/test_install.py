"""The installed layout (issue #19): `cmake --install` into a temp prefix,
the installed stokerd (started by the installed `stoker server`) runs a
real job with the installed stoker-run and Python helpers, driven by the
installed CLI; and the Debian package that CPack builds holds the same
layout, the unit, the maintainer scripts and the Depends of the binaries.
Nothing is installed on the machine itself and no systemd is needed."""
import glob
import json
import os
import shutil
import signal
import subprocess
import tempfile
import unittest

from harness import BIN, DEFAULT_CONFIG, IMAGE, container_job, read_text, wait_for

BUILD = os.path.dirname(os.path.abspath(BIN))
INSTALLED_BINARIES = ("stokerd", "stoker", "stoker-run")


def run(cmd, timeout=300, **kwargs):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)
    if r.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s\n%s" % (cmd, r.returncode, r.stdout, r.stderr))
    return r.stdout


def cmake_install(prefix):
    run(["cmake", "--install", BUILD, "--prefix", prefix])


class InstalledLayoutTest(unittest.TestCase):
    """One install per class: the layout checks and the daemon share it."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="stoker-install-")
        # Trainers of a root daemon may run as other accounts: the prefix
        # must be searchable by them, as /usr is.
        os.chmod(cls.tmp, 0o755)
        cls.prefix = os.path.join(cls.tmp, "prefix")
        cmake_install(cls.prefix)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def installed(self, *parts):
        return os.path.join(self.prefix, *parts)

    def test_layout_has_binaries_helpers_unit_config_and_docs(self):
        for name in INSTALLED_BINARIES:
            path = self.installed("bin", name)
            self.assertTrue(os.access(path, os.X_OK), path)
        helpers = self.installed("share", "stoker", "python", "hypertune", "__init__.py")
        self.assertTrue(os.path.isfile(helpers))
        # Only the modules (hypertune for trainers, the warm-start zygote), no
        # tests. (Bytecode may appear: a trainer of the daemon test may write it.)
        found = [os.path.relpath(os.path.join(d, f), self.installed("share", "stoker", "python"))
                 for d, _, files in os.walk(self.installed("share", "stoker", "python"))
                 for f in files if "__pycache__" not in d]
        self.assertEqual(sorted(found), ["hypertune/__init__.py", "stoker_zygote.py"])
        self.assertIn("listen:", read_text(self.installed("share", "stoker", "config.yaml")))
        for doc in ("README.md", "install.md", "security.md", "config.md",
                    os.path.join("decisions", "0002-sqlite-store.md")):
            self.assertTrue(os.path.isfile(self.installed("share", "doc", "stoker", doc)), doc)
        unit = read_text(self.installed("lib", "systemd", "system", "stokerd.service"))
        # The unit names this install's stokerd, not a path of the build.
        self.assertIn("ExecStart=%s --data-dir /var/lib/stoker --config /etc/stoker/config.yaml"
                      % self.installed("bin", "stokerd"), unit)
        self.assertIn("User=stoker", unit)
        self.assertIn("KillMode=process", unit)

    def test_unit_passes_systemd_analyze_verify(self):
        analyze = shutil.which("systemd-analyze")
        if not analyze:
            self.skipTest("systemd-analyze is not installed")
        unit = self.installed("lib", "systemd", "system", "stokerd.service")
        r = subprocess.run([analyze, "verify", unit], capture_output=True, text=True, timeout=60)
        # It needs no running systemd; a bad key or value is only a warning
        # on stderr, so any line about the unit fails the test.
        problems = [line for line in (r.stdout + r.stderr).splitlines()
                    if "stokerd.service" in line]
        self.assertEqual((r.returncode, problems), (0, []), r.stdout + r.stderr)

    def test_installed_daemon_runs_a_job_with_installed_runner_and_helpers(self):
        data = os.path.join(self.tmp, "data")
        os.makedirs(data)
        with open(os.path.join(data, "config.yaml"), "w") as f:
            f.write(DEFAULT_CONFIG)
        log = open(os.path.join(self.tmp, "stokerd.log"), "wb")
        # `stoker server` finds the stokerd beside it and execs it in the
        # foreground, as in a container.
        proc = subprocess.Popen(
            [self.installed("bin", "stoker"), "server", "--data-dir", data,
             "--listen", "127.0.0.1:0"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self.run_job_through(proc, data, log.name)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
            log.close()
            pattern = "stoker-run.*" + data
            subprocess.run(["pkill", "-KILL", "-f", pattern], check=False)

    def run_job_through(self, proc, data, log_name):
        addr = os.path.join(data, "stokerd.addr")

        def url():
            if proc.poll() is not None:
                raise AssertionError("the installed stokerd exited with %s:\n%s"
                                     % (proc.returncode, read_text(log_name)[-3000:]))
            return os.path.exists(addr) and read_text(addr).strip()
        server = wait_for(url, 30, "the installed stokerd to write its address")
        # `stoker server` exec'd stokerd itself: the process is the daemon.
        self.assertEqual(os.readlink("/proc/%d/exe" % proc.pid), self.installed("bin", "stokerd"))

        gate = os.path.join(self.tmp, "gate")
        script = ("python3 -c 'import hypertune; print(\"helpers:\", hypertune.__file__)'; "
                  "while [ ! -e %s ]; do sleep 0.05; done" % gate)
        job_file = os.path.join(self.tmp, "job.json")
        with open(job_file, "w") as f:
            json.dump(container_job("installed", script), f)
        env = dict(os.environ)
        env.pop("STOKER_SERVER", None)
        env["STOKER_HOME"] = os.path.join(self.tmp, "no-home")
        env["STOKER_TOKEN"] = read_text(os.path.join(data, "token")).strip()
        stoker = [self.installed("bin", "stoker"), "--server", server, "--project", "p",
                  "--region", "l"]
        out = run(stoker + ["--format", "json", "jobs", "submit", "--config", job_file], env=env)
        job_id = json.loads(out)["name"].rsplit("/", 1)[1]

        def replica_pids():
            # Supervising a replica (not one of the daemon's standbys, which
            # wait for a launch with `--standby`).
            pids = []
            for p in glob.glob("/proc/[0-9]*/exe"):
                try:
                    if os.readlink(p) == self.installed("bin", "stoker-run"):
                        with open(p[:-len("exe")] + "cmdline", "rb") as f:
                            if b"--replica-dir" in f.read().split(b"\0"):
                                pids.append(p)
                except OSError:
                    pass
            return pids
        # While the trainer waits at the gate, its supervisor is the
        # installed stoker-run.
        wait_for(replica_pids, 60, "the installed stoker-run to supervise the replica")
        open(gate, "w").close()

        def ended():
            out = run(stoker + ["--format", "json", "jobs", "describe", job_id], env=env)
            state = json.loads(out)["state"]
            return state if state in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED",
                                      "JOB_STATE_CANCELLED") else None
        self.assertEqual(wait_for(ended, 60, "the job to end"), "JOB_STATE_SUCCEEDED",
                         read_text(log_name)[-3000:])
        logs = run(stoker + ["jobs", "logs", job_id], env=env)
        self.assertIn("helpers: " + self.installed("share", "stoker", "python", "hypertune",
                                                   "__init__.py"), logs)


class DebianPackageTest(unittest.TestCase):
    """`cpack -G DEB` from the build dir (which first builds whatever is out of
    date: nothing after the build that ctest follows); the package is read,
    not installed."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="stoker-deb-")
        if not shutil.which("dpkg-deb") or not shutil.which("dpkg-shlibdeps"):
            raise unittest.SkipTest("dpkg-deb and dpkg-shlibdeps (dpkg-dev) are needed")
        run(["cpack", "-G", "DEB", "-B", cls.tmp, "--config",
             os.path.join(BUILD, "CPackConfig.cmake")], timeout=600)
        debs = glob.glob(os.path.join(cls.tmp, "stoker_*.deb"))
        assert len(debs) == 1, debs
        cls.deb = debs[0]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def control(self):
        fields = {}
        key = None
        for line in run(["dpkg-deb", "-f", self.deb]).splitlines():
            if line.startswith(" ") and key:
                fields[key] += "\n" + line
            elif ":" in line:
                key, value = line.split(":", 1)
                fields[key] = value.strip()
        return fields

    def test_contents_are_the_installed_layout_under_usr(self):
        listing = run(["dpkg-deb", "-c", self.deb])
        paths = {line.split()[-1] for line in listing.splitlines()}
        for expected in ["./usr/bin/stokerd", "./usr/bin/stoker", "./usr/bin/stoker-run",
                         "./usr/share/stoker/python/hypertune/__init__.py",
                         "./usr/share/stoker/config.yaml",
                         "./usr/lib/systemd/system/stokerd.service",
                         "./usr/share/doc/stoker/install.md",
                         "./usr/share/doc/stoker/README.md"]:
            self.assertIn(expected, paths)
        # Nothing outside /usr: /etc/stoker and /var/lib/stoker are postinst's.
        self.assertEqual([p for p in paths if not p.startswith("./usr") and p != "./"], [])
        # Binaries root's and executable by everyone (trainer accounts run stoker-run's exec).
        for line in listing.splitlines():
            if line.split()[-1].startswith("./usr/bin/") and not line.endswith("/"):
                self.assertTrue(line.startswith("-rwxr-xr-x root/root"), line)

    def test_unit_in_the_package_runs_usr_bin_stokerd(self):
        root = os.path.join(self.tmp, "root")
        run(["dpkg-deb", "-x", self.deb, root])
        unit = read_text(os.path.join(root, "usr", "lib", "systemd", "system", "stokerd.service"))
        self.assertIn("ExecStart=/usr/bin/stokerd --data-dir /var/lib/stoker "
                      "--config /etc/stoker/config.yaml", unit)
        self.assertIn("Documentation=file:///usr/share/doc/stoker/install.md", unit)

    def test_control_depends_on_the_libraries_the_binaries_link(self):
        control = self.control()
        self.assertEqual(control["Package"], "stoker")
        depends = control["Depends"]
        # One Debian package per shared library stokerd links (dpkg-shlibdeps).
        for lib in ("libsqlite3-0", "libyaml-cpp0.7", "libarchive13", "libssl3",
                    "libspdlog1.10", "libfmt9", "libstdc++6", "libc6", "passwd", "python3"):
            self.assertIn(lib, depends)

    def test_maintainer_scripts_make_account_and_data_dir_and_spare_systemd_less_hosts(self):
        control_dir = os.path.join(self.tmp, "control")
        run(["dpkg-deb", "-e", self.deb, control_dir])
        for script in ("postinst", "prerm", "postrm"):
            path = os.path.join(control_dir, script)
            self.assertTrue(os.access(path, os.X_OK), script)
            run(["sh", "-n", path])  # parses
        postinst = read_text(os.path.join(control_dir, "postinst"))
        self.assertIn("useradd --system", postinst)
        self.assertIn("/var/lib/stoker", postinst)
        # systemctl only where systemd runs (not in containers or CI).
        for script in ("postinst", "prerm", "postrm"):
            text = read_text(os.path.join(control_dir, script))
            for line in text.splitlines():
                if "systemctl " in line and not line.lstrip().startswith("#"):
                    self.assertIn("/run/systemd/system", text)


if __name__ == "__main__":
    unittest.main()
