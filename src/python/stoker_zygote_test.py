"""stoker_zygote.py's protocol driven directly, without stoker-run: a real
zygote process, real fds passed over its socket, real forked children.
(tests/e2e/test_warm_starts.py runs it under stoker-run and stokerd.)"""
import json
import os
import secrets
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import unittest

ZYGOTE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stoker_zygote.py")

SCRIPT = r'''
import json, os, sys
open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ran"), "w").write("x")
print(json.dumps({"argv": sys.argv, "foo": os.environ.get("FOO"), "cwd": os.getcwd(),
                  "zygote_in_modules": any("zygote" in n for n in sys.modules),
                  "selectors_loaded": "selectors" in sys.modules,
                  "pgid_is_pid": os.getpgid(0) == os.getpid()}))
sys.exit(3)
'''


def memory_holds(pid, needle):
    """How many times `needle` is in the readable memory of process `pid`."""
    hits = 0
    with open("/proc/%d/maps" % pid) as maps, open("/proc/%d/mem" % pid, "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            if not fields[1].startswith("r") or fields[-1] in ("[vvar]", "[vsyscall]"):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            try:
                mem.seek(start)
                hits += mem.read(end - start).count(needle)
            except OSError:
                continue
    return hits


def read_line(fd_or_sock, timeout=30):
    data = b""
    if isinstance(fd_or_sock, socket.socket):
        fd_or_sock.settimeout(timeout)
        while not data.endswith(b"\n"):
            chunk = fd_or_sock.recv(1)
            if not chunk:
                break
            data += chunk
    else:
        while not data.endswith(b"\n"):
            chunk = os.read(fd_or_sock, 1)
            if not chunk:
                break
            data += chunk
    return json.loads(data) if data else None


class ZygoteTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="zygote-test-")
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            p.kill()
            p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def start(self, preload, pythonpath=None):
        """Starts a zygote as stoker-run does: the socket bound here (under a
        temporary name, renamed once it is ready) and passed as fd 4, the
        directory as an O_PATH fd 5."""
        sock = os.path.join(self.dir, "z%d.sock" % len(self.procs))
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(sock + ".tmp")
        dir_fd = os.open(self.dir, os.O_PATH | os.O_DIRECTORY)
        r, w = os.pipe()
        env = {"PATH": "/usr/bin:/bin", "HOME": self.dir}
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        fds = {3: w, 4: listener.fileno(), 5: dir_fd}
        with open(os.path.join(self.dir, "zygote.log"), "ab") as log:
            self.procs.append(subprocess.Popen(
                [sys.executable, ZYGOTE, "--socket", sock, "--listen-fd", "4", "--dir-fd", "5",
                 "--client-uid", str(os.geteuid()), "--preload", ",".join(preload),
                 "--idle", "30", "--ready-fd", "3"], env=env, pass_fds=list(fds.values()) + [3, 4, 5],
                preexec_fn=lambda: [os.dup2(fd, n) for n, fd in
                                    sorted(((n, os.dup(fd)) for n, fd in fds.items()))],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log))
        for fd in (w, dir_fd):
            os.close(fd)
        listener.close()
        ready = read_line(r)
        os.close(r)
        if not (ready and ready["ready"]):
            with open(os.path.join(self.dir, "zygote.log")) as f:
                self.fail("the zygote did not start: " + f.read())
        os.rename(sock + ".tmp", sock)
        return sock, ready

    def request(self, sock, req, go=True, home=None):
        """Sends `req`; returns (reply, final status line or None, output)."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sock)
        out_r, out_w = os.pipe()
        go_r, go_w = os.pipe()
        null = os.open("/dev/null", os.O_RDONLY)
        header = json.dumps({"fds": ["stdin", "out", "go"], "home": home}).encode()
        body = json.dumps(req).encode()
        frame = struct.pack(">I", len(header)) + header + struct.pack(">I", len(body)) + body
        socket.send_fds(s, [frame], [null, out_w, go_r])
        for fd in (null, out_w, go_r):
            os.close(fd)
        reply = read_line(s)
        if reply and "pid" in reply and go:
            os.write(go_w, b"g")
        os.close(go_w)
        status = read_line(s) if reply and "pid" in reply else None
        s.close()
        output = b""
        while True:
            chunk = os.read(out_r, 65536)
            if not chunk:
                break
            output += chunk
        os.close(out_r)
        return reply, status, output.decode()

    def script_request(self, **extra):
        script = os.path.join(self.dir, "train.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        req = {"mode": "script", "target": script, "args": ["--lr", "0.1"], "python": "python3",
               "env": {"FOO": "bar", "PATH": "/usr/bin:/bin", "HOME": self.dir},
               "cwd": self.dir,
               "run_as": {"uid": os.geteuid(), "gid": os.getegid(), "umask": 0o22}}
        req.update(extra)
        return req

    def test_a_child_runs_the_script_as_a_fresh_run_and_its_status_comes_back(self):
        sock, ready = self.start(["json", "selectors"])
        self.assertEqual(ready["preloaded"], ["json", "selectors"])
        reply, status, output = self.request(sock, self.script_request())
        self.assertIn("pid", reply)
        self.assertEqual(reply["preloaded"], ["json", "selectors"])
        self.assertEqual(os.waitstatus_to_exitcode(status["status"]), 3, output)
        seen = json.loads(output.splitlines()[0])
        self.assertEqual(seen["argv"], [os.path.join(self.dir, "train.py"), "--lr", "0.1"])
        self.assertEqual(seen["foo"], "bar")
        self.assertEqual(seen["cwd"], self.dir)
        self.assertFalse(seen["zygote_in_modules"])
        self.assertTrue(seen["selectors_loaded"])  # preloaded: kept
        self.assertTrue(seen["pgid_is_pid"])

    def test_a_child_that_never_gets_go_runs_nothing(self):
        sock, _ = self.start(["json"])
        reply, status, _ = self.request(sock, self.script_request(), go=False)
        self.assertIn("pid", reply)
        self.assertEqual(os.waitstatus_to_exitcode(status["status"]), 0)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "ran")))
        # The zygote serves on.
        reply, status, _ = self.request(sock, self.script_request())
        self.assertEqual(os.waitstatus_to_exitcode(status["status"]), 3)
        self.assertTrue(os.path.exists(os.path.join(self.dir, "ran")))

    def test_a_preload_that_initialised_cuda_is_refused_before_any_fork(self):
        fake = os.path.join(self.dir, "fake")
        os.makedirs(os.path.join(fake, "torch"))
        with open(os.path.join(fake, "torch", "__init__.py"), "w") as f:
            f.write("class cuda:\n    is_initialized = staticmethod(lambda: True)\n")
        sock, ready = self.start(["torch"], pythonpath=fake)
        self.assertEqual(ready["preloaded"], ["torch"])
        reply, status, _ = self.request(sock, self.script_request())
        self.assertEqual(reply, {"error": "CUDA was initialised in the warm interpreter by its "
                                          "preload"})
        self.assertFalse(os.path.exists(os.path.join(self.dir, "ran")))

    def test_an_account_with_a_user_site_directory_is_refused(self):
        sock, _ = self.start(["json"])
        site = os.path.join(self.dir, ".local", "lib", "python%d.%d" % sys.version_info[:2],
                            "site-packages")
        os.makedirs(site)
        reply, _, _ = self.request(sock, self.script_request(), home=self.dir)
        self.assertIn("user site-packages directory " + site, reply["error"])

    def test_no_earlier_request_is_left_in_the_zygotes_memory(self):
        if not os.access("/proc/self/mem", os.R_OK) or os.geteuid() != 0:
            self.skipTest("reading a non-dumpable process's memory needs root")
        sock, _ = self.start(["json"])
        zygote = self.procs[-1].pid
        marker = "MARKER" + secrets.token_hex(16)
        req = self.script_request(args=["--token", marker + "-argv"])
        req["env"]["SECRET_TOKEN"] = marker + "-env"
        reply, status, output = self.request(sock, req)
        self.assertEqual(os.waitstatus_to_exitcode(status["status"]), 3, output)
        self.assertIn(marker, output)  # the child did get it
        # A later request, as a later trainer forked from the same zygote
        # would be: nothing of the earlier one in the memory it inherits.
        reply, status, output = self.request(sock, self.script_request())
        self.assertEqual(os.waitstatus_to_exitcode(status["status"]), 3, output)
        self.assertEqual(memory_holds(zygote, marker.encode()), 0)
        # The scan itself finds what is there.
        self.assertGreater(memory_holds(zygote, b"stoker-zygote["), 0)

    def test_the_zygote_is_not_dumpable_and_refuses_other_accounts(self):
        sock, _ = self.start(["json"])
        zygote = self.procs[-1].pid
        self.assertEqual(os.stat("/proc/%d/environ" % zygote).st_uid, 0)  # as non-dumpable
        if os.geteuid() != 0:
            return
        # Reachable by anyone here, to show the zygote's own check (a real
        # zygote's socket is in stoker-run's 0700 directory).
        os.chmod(self.dir, 0o711)
        os.chmod(sock, 0o777)
        pid = os.fork()
        if pid == 0:  # another account's client: connected, then refused
            code = 1
            try:
                os.setgid(65534)
                os.setuid(65534)
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(sock)
                code = 0 if s.recv(1) == b"" else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        with open(os.path.join(self.dir, "zygote.log")) as f:
            self.assertIn("refused a connection from uid 65534", f.read())

    def test_a_preload_that_cannot_be_imported_is_skipped_and_named(self):
        _, ready = self.start(["json", "no_such_module_here"])
        self.assertEqual(ready["preloaded"], ["json"])
        self.assertIn("ModuleNotFoundError", ready["skipped"]["no_such_module_here"])


if __name__ == "__main__":
    unittest.main()
