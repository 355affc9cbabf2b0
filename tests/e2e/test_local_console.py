"""The local daemon's fixed address and `stoker console` (docs/console.md):
the daemon the CLI starts listens on $STOKER_LOCAL_PORT (default 8470) and
keeps that address across restarts; a taken port makes it take the next
free one and say so; a stale stokerd.addr (a daemon killed, its port now
another user's daemon's) is not trusted; `stoker console` prints a one-time
sign-in link that opens a session once, in a real Chromium when one is
installed, and not after its token is revoked.

The tests choose a free port of their own for $STOKER_LOCAL_PORT: 8470 may
be held by another test's daemon (ctest runs two at a time).
"""
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import unittest
import urllib.error
import urllib.request

import harness
from harness import STOKER, pid_alive, read_text, wait_for

try:
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
except ImportError:
    webdriver = None

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


def free_port_block(size=10):
    """A port P such that P..P+size-1 were all free a moment ago."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            first = s.getsockname()[1]
        if first + size > 65535:
            continue
        socks = []
        try:
            for p in range(first, first + size):
                t = socket.socket()
                t.bind(("127.0.0.1", p))
                socks.append(t)
            return first
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()
    raise AssertionError("no block of %d free ports" % size)


def lock_is_free(path):
    with open(path) as f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return True
        except OSError:
            return False


def post(url, body, headers=None, token=None):
    h = {"content-type": "application/json"}
    h.update(headers or {})
    if token:
        h["authorization"] = "Bearer " + token
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers=h)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"{}"), r.headers
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}"), e.headers


class LocalDaemonAddressTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stoker-e2e-local-")
        self.port = free_port_block()
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("STOKER_SERVER", "STOKER_TOKEN", "DISPLAY", "WAYLAND_DISPLAY")}
        self.env["STOKER_LOCAL_PORT"] = str(self.port)
        self.holders = []

    def tearDown(self):
        for s in self.holders:
            s.close()
        for d in os.listdir(self.tmp):
            pidfile = os.path.join(self.tmp, d, "stokerd.pid")
            if os.path.exists(pidfile):
                text = read_text(pidfile).strip()
                if text and pid_alive(int(text)):
                    os.kill(int(text), signal.SIGTERM)
                    wait_for(lambda: not pid_alive(int(text)), 20, "stokerd to stop")
        shutil.rmtree(self.tmp, ignore_errors=True)

    def cli(self, home, *args, check=True):
        env = dict(self.env, STOKER_HOME=home)
        r = subprocess.run([STOKER] + list(args), capture_output=True, text=True, env=env,
                           timeout=90)
        if check and r.returncode != 0:
            raise AssertionError("stoker %s failed (%d):\n%s\n%s" % (
                " ".join(args), r.returncode, r.stdout, r.stderr))
        return r

    def console(self, home):
        return json.loads(self.cli(home, "console", "--no-browser", "--format", "json").stdout)

    def stop(self, home):
        pid = int(read_text(os.path.join(home, "stokerd.pid")).strip())
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not pid_alive(pid), 20, "stokerd to stop")

    def hold(self, port):
        s = socket.socket()
        s.bind(("127.0.0.1", port))
        s.listen(1)
        self.holders.append(s)

    def test_the_local_daemon_keeps_its_port_across_restarts(self):
        home = os.path.join(self.tmp, "home")
        first = self.console(home)
        self.assertEqual(first["url"], "http://127.0.0.1:%d/" % self.port)
        self.assertTrue(first["signInUrl"].startswith(
            "http://127.0.0.1:%d/console/signin.html#code=" % self.port), first)
        self.stop(home)
        self.assertEqual(self.console(home)["url"], "http://127.0.0.1:%d/" % self.port)
        text = self.cli(home, "console", "--no-browser").stdout
        self.assertIn("Console:  http://127.0.0.1:%d/" % self.port, text)
        self.assertIn("works once, for two minutes", text)
        self.assertNotIn("was taken", text)

    def test_a_taken_port_makes_it_take_the_next_and_say_so(self):
        self.hold(self.port)
        home = os.path.join(self.tmp, "home")
        text = self.cli(home, "console", "--no-browser").stdout
        self.assertIn("Console:  http://127.0.0.1:%d/" % (self.port + 1), text)
        self.assertIn("port %d was taken" % self.port, text)
        log = read_text(os.path.join(home, "stokerd.log"))
        self.assertIn("127.0.0.1:%d cannot be used" % self.port, log)
        self.assertIn("trying 127.0.0.1:%d" % (self.port + 1), log)

    def test_a_stale_address_is_not_trusted(self):
        # Alice's daemon dies without cleaning up; Bob's daemon gets her port.
        alice = os.path.join(self.tmp, "alice")
        user = self.console(alice)["user"]
        pid = int(read_text(os.path.join(alice, "stokerd.pid")).strip())
        os.kill(pid, signal.SIGKILL)
        # A child it forked may hold the pid file's lock a moment longer.
        wait_for(lambda: not pid_alive(pid) and lock_is_free(os.path.join(alice, "stokerd.pid")),
                 20, "alice's stokerd to die")
        self.assertEqual(read_text(os.path.join(alice, "stokerd.addr")).strip(),
                         "http://127.0.0.1:%d" % self.port)
        bob = os.path.join(self.tmp, "bob")
        os.makedirs(bob)
        proc = subprocess.Popen([harness.STOKERD, "--data-dir", bob, "--listen",
                                 "127.0.0.1:%d" % self.port],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            wait_for(lambda: os.path.exists(os.path.join(bob, "stokerd.addr")), 20,
                     "bob's stokerd to listen")
            # Alice's CLI starts her own daemon (on the next port) instead of
            # sending her token to Bob's, and her commands work.
            r = self.cli(alice, "jobs", "list")
            self.assertEqual(r.returncode, 0, r.stderr)
            url = read_text(os.path.join(alice, "stokerd.addr")).strip()
            self.assertEqual(url, "http://127.0.0.1:%d" % (self.port + 1))
            self.assertEqual(self.console(alice)["user"], user)
        finally:
            proc.terminate()
            proc.wait(timeout=30)

    def test_a_bad_local_port_is_refused_naming_the_variable(self):
        self.env["STOKER_LOCAL_PORT"] = "http"
        r = self.cli(os.path.join(self.tmp, "home"), "jobs", "list", check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("STOKER_LOCAL_PORT: 'http' is not a port", r.stderr)


class SignInLinkTest(harness.StokerTestCase):

    def link(self, token=None):
        status, body, _ = post(self.daemon.url + "/v1/stoker/console:signInLink", {},
                               token=token or self.daemon.token)
        self.assertEqual(status, 200, body)
        return body

    def redeem(self, code):
        return post(self.daemon.url + "/console/session", {"link": code})

    def test_a_link_opens_one_session_for_its_user(self):
        status, me = self.api("GET", "/v1/whoami")
        self.assertEqual(status, 200, me)
        link = self.link()
        self.assertEqual(link["user"], me["user"])
        status, body, headers = self.redeem(link["code"])
        self.assertEqual(status, 200, body)
        self.assertEqual((body["user"], body["role"]), (me["user"], "admin"))
        self.assertIn("stoker_session=", headers["Set-Cookie"])
        status, body, _ = self.redeem(link["code"])
        self.assertEqual(status, 401, body)
        self.assertIn("used already", body["error"]["message"])

    def test_a_viewer_may_ask_and_gets_a_viewers_session(self):
        viewer = self.add_user("vera", "viewer")
        status, body, _ = self.redeem(self.link(viewer)["code"])
        self.assertEqual(status, 200, body)
        self.assertEqual((body["user"], body["role"]), ("vera", "viewer"))

    def test_a_revoked_tokens_link_opens_nothing(self):
        status, issued = self.api("POST", "/v1/admin/users", {"name": "rita", "role": "user"})
        self.assertEqual(status, 200, issued)
        status, issued = self.api("POST", "/v1/admin/users/rita/tokens", {})
        self.assertEqual(status, 200, issued)
        link = self.link(issued["token"])
        status, body = self.api("POST", "/v1/admin/tokens/%s:revoke" % issued["id"], {})
        self.assertEqual(status, 200, body)
        status, body, _ = self.redeem(link["code"])
        self.assertEqual(status, 401, body)

    def test_no_token_no_link(self):
        status, body, _ = post(self.daemon.url + "/v1/stoker/console:signInLink", {})
        self.assertEqual(status, 401, body)

    def test_the_link_signs_a_browser_in_once(self):
        if webdriver is None or not CHROMIUM or not CHROMEDRIVER:
            harness.skip_or_fail(self, "chromium, chromium-driver and python3-selenium are needed "
                                 "(scripts/install-deps.sh --test)")
        r = self.stoker("console", "--no-browser", "--format", "json")
        url, user = json.loads(r.stdout)["signInUrl"], json.loads(r.stdout)["user"]
        drivers = []

        def browser(n):
            options = webdriver.ChromeOptions()
            options.binary_location = CHROMIUM
            for arg in ("--headless=new", "--no-sandbox", "--disable-gpu",
                        "--disable-dev-shm-usage", "--no-first-run",
                        "--user-data-dir=" + os.path.join(self.tmp, "chrome-%d" % n)):
                options.add_argument(arg)
            d = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
            d.set_page_load_timeout(60)
            drivers.append(d)
            return d

        def probe(d, what):
            def f():
                try:
                    return what(d)
                except WebDriverException:
                    return None
            return f

        try:
            first = browser(0)
            first.get(url)
            wait_for(probe(first, lambda d: d.find_element(By.ID, "who").text == user + " (admin)"),
                     60, "the console to show the signed-in user")
            self.assertTrue(first.current_url.endswith("/#/jobs"), first.current_url)
            self.assertNotIn("code=", first.current_url)
            self.assertIsNotNone(first.get_cookie("stoker_session"))
            # The same link in another browser: refused, with the way out.
            second = browser(1)
            second.get(url)
            message = wait_for(probe(second, lambda d: d.find_element(By.ID, "link-status").text
                                     if "used already" in d.find_element(By.ID, "link-status").text
                                     else None), 60, "the used link's message")
            self.assertIn("stoker console", message)
            self.assertIsNone(second.get_cookie("stoker_session"))
        finally:
            for d in drivers:
                try:
                    d.quit()
                except WebDriverException:
                    pass


if __name__ == "__main__":
    harness.main()
