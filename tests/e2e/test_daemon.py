"""Starting the daemon and finding it."""
import os
import shutil
import signal
import subprocess
import tempfile
import unittest
import urllib.request

from harness import STOKER, Daemon, pid_alive, read_text, stokerd_refuses, wait_for


class DaemonTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stoker-daemon-")
        self.env = {k: v for k, v in os.environ.items() if k != "STOKER_SERVER"}

    def tearDown(self):
        for d in os.listdir(self.tmp):
            pidfile = os.path.join(self.tmp, d, "stokerd.pid")
            if os.path.exists(pidfile):
                text = read_text(pidfile).strip()
                if text and pid_alive(int(text)):
                    os.kill(int(text), signal.SIGTERM)
                    wait_for(lambda: not pid_alive(int(text)), 20, "stokerd to stop")
        shutil.rmtree(self.tmp, ignore_errors=True)

    def cli(self, *args, env=None):
        e = dict(self.env)
        e.update(env or {})
        return subprocess.run([STOKER] + list(args), capture_output=True, text=True, env=e, timeout=60)

    def test_daemon_writes_addr_and_pid_and_refuses_a_second_instance(self):
        data = os.path.join(self.tmp, "d1")
        os.makedirs(data)
        d = Daemon(data, "").start()
        self.assertEqual(read_text(os.path.join(data, "stokerd.pid")).strip(), str(d.proc.pid))
        self.assertTrue(d.url.startswith("http://127.0.0.1:"))
        self.assertIn("another stokerd is running", stokerd_refuses(data))
        d.kill(signal.SIGTERM)
        self.assertEqual(d.proc.returncode, 0)
        self.assertFalse(os.path.exists(os.path.join(data, "stokerd.addr")))

    def test_a_runner_it_cannot_run_stops_the_daemon_naming_it_and_the_flag(self):
        data = os.path.join(self.tmp, "d-runner")
        stderr = stokerd_refuses(data, args=["--runner", "/nonexistent/stoker-run"])
        self.assertIn("cannot run stoker-run at /nonexistent/stoker-run", stderr)
        self.assertIn("--runner", stderr)

    def test_cli_finds_the_daemon_by_flag_env_and_home(self):
        data = os.path.join(self.tmp, "d2")
        os.makedirs(data)
        d = Daemon(data, "").start()
        # With --server or $STOKER_SERVER the token comes from $STOKER_TOKEN.
        nowhere = {"STOKER_HOME": os.path.join(self.tmp, "empty-home"), "STOKER_TOKEN": d.token}
        self.assertEqual(self.cli("--server", d.url, "jobs", "list", env=nowhere).returncode, 0)
        self.assertEqual(self.cli("jobs", "list", env=dict(nowhere, STOKER_SERVER=d.url)).returncode, 0)
        self.assertEqual(self.cli("jobs", "list", env={"STOKER_HOME": data}).returncode, 0)
        # No second daemon was started for any of those.
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "empty-home")))
        r = self.cli("jobs", "list", env={"STOKER_SERVER": "http://127.0.0.1:1"})
        self.assertEqual(r.returncode, 4)
        self.assertIn("cannot reach", r.stderr)
        d.kill(signal.SIGTERM)

    def test_cli_starts_a_daemon_for_stoker_home_when_none_answers(self):
        home = os.path.join(self.tmp, "home")
        r = self.cli("jobs", "list", env={"STOKER_HOME": home})
        self.assertEqual(r.returncode, 0, r.stderr)
        url = read_text(os.path.join(home, "stokerd.addr")).strip()
        with urllib.request.urlopen(url + "/healthz") as resp:
            self.assertEqual(resp.status, 200)
        pid = int(read_text(os.path.join(home, "stokerd.pid")))
        self.assertTrue(pid_alive(pid))
        # The next call reuses it.
        self.assertEqual(self.cli("jobs", "list", env={"STOKER_HOME": home}).returncode, 0)
        self.assertEqual(int(read_text(os.path.join(home, "stokerd.pid"))), pid)
