"""Hostile input against a real stokerd: every request below must get a 4xx
(never a 5xx, never a hang over 10 s), the daemon must keep answering
/healthz after each, and nothing may appear outside its data dir.

Raw sockets throughout, so that malformed HTTP reaches the server as sent.
"""
import gzip
import io
import json
import os
import select
import socket
import tarfile
import time
import unittest
import urllib.parse
import zlib

from harness import IMAGE, StokerTestCase, container_job

HANG = 10.0  # seconds: anything slower counts as a hang
JOBS = "/v1/projects/p/locations/l/customJobs"
STUDIES = "/v1/projects/p/locations/l/hyperparameterTuningJobs"


def deep_array(n):
    return "[" * n + "]" * n


def deep_object(n):
    return '{"a":' * n + "1" + "}" * n


def package_job(uri):
    return {"displayName": "pkg", "jobSpec": {"workerPoolSpecs": [{
        "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
        "pythonPackageSpec": {"executorImageUri": IMAGE, "packageUris": [uri],
                              "pythonModule": "trainer.task"}}]}}


def study(**overrides):
    body = {"displayName": "s", "studySpec": {
        "metrics": [{"metricId": "m", "goal": "MAXIMIZE"}],
        "parameters": [{"parameterId": "x", "doubleValueSpec": {"minValue": 0, "maxValue": 1}}]},
        "trialJobSpec": {"workerPoolSpecs": [{
            "machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 1,
            "containerSpec": {"imageUri": IMAGE, "command": ["true"]}}]}}
    body.update(overrides)
    return body


def targz(members, fmt=tarfile.PAX_FORMAT):
    """members: (name, kind, arg); kind in file/dir/sym/hard/fifo/chr."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=fmt) as t:
        for name, kind, arg in members:
            ti = tarfile.TarInfo(name)
            if kind == "file":
                data = arg.encode()
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
                continue
            ti.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
                       "fifo": tarfile.FIFOTYPE, "chr": tarfile.CHRTYPE}[kind]
            if kind in ("sym", "hard"):
                ti.linkname = arg
            t.addfile(ti)
    return buf.getvalue()


def zero_bomb(entry_sizes):
    """A tar.gz of files full of zeros, built as concatenated gzip members so
    that gigabytes cost megabytes and no time: one 64 MiB zero member is
    compressed once and repeated."""
    chunk = 64 << 20
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = comp.compress(b"\0" * chunk) + comp.flush()
    out = []
    for i, size in enumerate(entry_sizes):
        ti = tarfile.TarInfo("bomb/zeros%d.bin" % i)
        ti.size = size
        out.append(gzip.compress(ti.tobuf(format=tarfile.GNU_FORMAT)))
        assert size % chunk == 0
        out.extend([zeros] * (size // chunk))
    out.append(gzip.compress(b"\0" * 1024))
    return b"".join(out)


def declared_bomb(size):
    """One header that declares `size` bytes, followed by almost nothing."""
    ti = tarfile.TarInfo("big.bin")
    ti.size = size
    return gzip.compress(ti.tobuf(format=tarfile.PAX_FORMAT) + b"\0" * 4096)


def entry_bomb(n):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.USTAR_FORMAT,
                      compresslevel=1) as t:
        for i in range(n):
            t.addfile(tarfile.TarInfo("f%d" % i))
    return buf.getvalue()


class HostileInputTest(StokerTestCase):

    def setUp(self):
        super().setUp()
        u = urllib.parse.urlsplit(self.daemon.url)
        self.addr = (u.hostname, u.port)
        # Bait outside the data dir: a traversal that works would read or
        # replace it, or add files next to it.
        self.outside = os.path.join(self.tmp, "outside")
        os.makedirs(self.outside)
        with open(os.path.join(self.outside, "secret"), "w") as f:
            f.write("TOP-SECRET")
        self.before = self.snapshot()
        self.cases = 0

    def tearDown(self):
        print("\n  %s: %d hostile requests" % (self._testMethodName, self.cases))
        try:
            self.assertTrue(self.healthy(), "stokerd stopped answering /healthz")
            self.assertEqual(self.snapshot(), self.before,
                             "something was written outside the data dir")
            with open(os.path.join(self.outside, "secret")) as f:
                self.assertEqual(f.read(), "TOP-SECRET")
        finally:
            super().tearDown()

    def snapshot(self):
        """Every path under the test's temp dir except the data dir, with sizes."""
        out = {}
        for root, dirs, files in os.walk(self.tmp):
            if root == self.tmp:
                dirs[:] = [d for d in dirs if os.path.join(root, d) != self.data]
            for name in dirs + files:
                p = os.path.join(root, name)
                out[p] = os.lstat(p).st_size if name in files else -1
        return out

    # ---- raw HTTP ----

    def exchange(self, data, timeout=HANG, stream=None):
        """Sends `data` (then optionally the iterable `stream` of chunks,
        stopping early once the server answers); returns (status, body bytes,
        seconds). status None: the server closed without answering."""
        start = time.monotonic()
        deadline = start + timeout
        s = socket.create_connection(self.addr, timeout=timeout)
        try:
            try:
                s.sendall(data)
                for chunk in stream or ():
                    if select.select([s], [], [], 0)[0]:
                        break  # an early answer (413): stop sending
                    s.sendall(chunk)
                    if time.monotonic() > deadline:
                        break
            except (BrokenPipeError, ConnectionResetError):
                pass
            buf = bytearray()
            while b"\r\n\r\n" not in buf:
                s.settimeout(max(0.01, deadline - time.monotonic()))
                try:
                    piece = s.recv(65536)
                except ConnectionResetError:
                    piece = b""
                except socket.timeout:
                    self.fail("no answer within %.0f s to %r" % (timeout, data[:200]))
                if not piece:
                    return None, bytes(buf), time.monotonic() - start
                buf += piece
            head, _, rest = bytes(buf).partition(b"\r\n\r\n")
            body = bytearray(rest)
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split()[1])
            length = 0
            for line in lines[1:]:
                k, _, v = line.partition(":")
                if k.strip().lower() == "content-length":
                    length = int(v)
            while len(body) < length:
                s.settimeout(max(0.01, deadline - time.monotonic()))
                piece = s.recv(65536)
                if not piece:
                    break
                body += piece
            return status, bytes(body), time.monotonic() - start
        finally:
            s.close()

    def request(self, method, target, body=b"", headers=None, auth=True, **kw):
        """Sends one request, as the local admin unless `auth` is False."""
        if isinstance(body, str):
            body = body.encode()
        if isinstance(target, str):
            target = target.encode("latin-1")
        head = [b"%s %s HTTP/1.1" % (method.encode(), target), b"Host: stoker",
                b"Connection: close", b"Content-Type: application/json"]
        if auth:
            head.append(b"Authorization: Bearer " + self.daemon.token.encode())
        if (body or method in ("POST", "PUT", "PATCH")) and "Content-Length" not in (headers or {}):
            head.append(b"Content-Length: %d" % len(body))
        for k, v in (headers or {}).items():
            head.append(("%s: %s" % (k, v)).encode("latin-1"))
        return self.exchange(b"\r\n".join(head) + b"\r\n\r\n" + body, **kw)

    def healthy(self):
        try:
            status, _, _ = self.exchange(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return status == 200
        except (OSError, AssertionError):
            return False

    def check(self, what, result, allowed=None, want=None, limit=HANG):
        """`result`: (status, body, seconds). 4xx (or a status in `allowed`),
        fast, and the daemon still answers."""
        status, body, seconds = result
        self.cases += 1
        self.assertLess(seconds, limit, "%s: took %.1f s" % (what, seconds))
        if seconds > 2:
            print("\n  slow: %s: %.1f s" % (what, seconds))
        self.assertIsNotNone(status, "%s: connection closed without an answer" % what)
        if allowed and status in allowed:
            pass
        else:
            self.assertTrue(400 <= status < 500, "%s: got %s %s" % (what, status, body[:500]))
        if want:
            self.assertIn(want.encode(), body, what)
        self.assertNotIn(b"TOP-SECRET", body, what)
        self.assertTrue(self.healthy(), "%s: stokerd stopped answering /healthz" % what)
        return status, body

    def post_json(self, what, path, text, **kw):
        return self.check(what, self.request("POST", path, text), **kw)

    # ---- JSON bodies ----

    def test_deeply_nested_json(self):
        n = 100000
        for label, deep in (("array", deep_array(n)), ("object", deep_object(n))):
            self.post_json("bare deep " + label, JOBS, deep)
            self.post_json("deep %s as jobSpec" % label, JOBS, '{"displayName":"x","jobSpec":%s}' % deep)
            pool = ('{"machineSpec":{"machineType":"e2-standard-2"},"replicaCount":1,'
                    '"containerSpec":{"imageUri":"%s","command":["true"]}' % IMAGE)
            for field in ("network", "pscInterfaceConfig", "reservedIpRanges"):
                self.post_json("deep %s in jobSpec.%s" % (label, field), JOBS,
                               '{"displayName":"x","jobSpec":{"workerPoolSpecs":[%s}],"%s":%s}}'
                               % (pool, field, deep))
            self.post_json("deep %s in encryptionSpec" % label, JOBS,
                           '{"displayName":"x","encryptionSpec":%s,"jobSpec":{"workerPoolSpecs":[%s}]}}'
                           % (deep, pool))
            self.post_json("deep %s in diskSpec" % label, JOBS,
                           '{"displayName":"x","jobSpec":{"workerPoolSpecs":[%s,"diskSpec":%s}]}}'
                           % (pool, deep))
            self.post_json("deep %s in args" % label, JOBS,
                           '{"displayName":"x","jobSpec":{"workerPoolSpecs":[%s,"args":[%s]}}]}}'
                           % (pool[:-1], deep))
            self.post_json("deep %s in labels" % label, JOBS,
                           '{"displayName":"x","labels":%s,"jobSpec":{}}' % deep)
            self.post_json("deep %s as bucket name" % label, "/storage/v1/b", '{"name":%s}' % deep)
            self.post_json("deep %s as study" % label, STUDIES, deep)
            s = json.dumps(study())
            self.post_json("deep %s in studyStoppingConfig" % label, STUDIES,
                           s[:-1] + ',"studySpec":{"metrics":[{"metricId":"m","goal":"MAXIMIZE"}],'
                           '"parameters":[{"parameterId":"x","doubleValueSpec":{"minValue":0,"maxValue":1}}],'
                           '"studyStoppingConfig":%s}}' % deep)
            self.post_json("deep %s in convex stopping" % label, STUDIES,
                           s[:-1] + ',"studySpec":{"metrics":[{"metricId":"m","goal":"MAXIMIZE"}],'
                           '"parameters":[{"parameterId":"x","doubleValueSpec":{"minValue":0,"maxValue":1}}],'
                           '"convexAutomatedStoppingSpec":%s}}' % deep)
            self.post_json("deep %s as measurement" % label,
                           "/v1/projects/p/locations/l/studies/1/trials/1:addTrialMeasurement", deep)

    def test_huge_strings_and_arrays(self):
        big = "a" * (16 << 20)
        self.post_json("16 MiB displayName", JOBS, json.dumps(container_job(big, "true")))
        self.post_json("16 MiB label", JOBS, json.dumps(dict(container_job("x", "true"), labels={big: "v"})))
        self.post_json("16 MiB bucket name", "/storage/v1/b", json.dumps({"name": big}))
        self.post_json("16 MiB JSON string that never ends", JOBS, '{"displayName":"' + big)
        # gs:// URIs inside args and env are scanned with a regex: make them long.
        long_uri = "gs://" + "b" * (4 << 20)
        job = container_job("x", "true")
        job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"] = [long_uri]
        self.post_json("4 MiB gs:// arg", JOBS, json.dumps(job))
        self.post_json("4 MiB gs:// env", JOBS, json.dumps(container_job("x", "true", env=[("E", long_uri)])))
        self.post_json("4 MiB gs:// command", JOBS, json.dumps(container_job("x", long_uri)))
        self.post_json("4 MiB package URI", JOBS, json.dumps(package_job(long_uri)))
        self.post_json("4 MiB output dir", JOBS, json.dumps(
            dict(container_job("x", "true"), jobSpec=dict(container_job("x", "true")["jobSpec"],
                                                          baseOutputDirectory={"outputUriPrefix": long_uri}))))
        # Huge arrays.
        self.post_json("1M worker pools", JOBS,
                       '{"displayName":"x","jobSpec":{"workerPoolSpecs":[' + ",".join(["{}"] * (1 << 20)) + "]}}")
        job = container_job("x", "true")
        job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"] = ["gs://nob/x"] * 200000
        self.post_json("200k args naming a missing bucket", JOBS, json.dumps(job))
        # With a bucket that exists, the bounds themselves answer: one string
        # past Linux's MAX_ARG_STRLEN, or more than 1 MiB in all.
        self.assertEqual(self.api("POST", "/storage/v1/b", {"name": "real"})[0], 200)
        job = container_job("x", "true")
        job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"] = ["gs://real/x"] * 200000
        self.post_json("200k args naming a real bucket", JOBS, json.dumps(job),
                       want="are allowed (they share one execve's ARG_MAX)")
        job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"] = ["gs://real/" + "x" * (1 << 20)]
        self.post_json("a 1 MiB arg", JOBS, json.dumps(job), want="MAX_ARG_STRLEN")
        self.post_json("a 1 MiB env value", JOBS, json.dumps(container_job(
            "x", "true", env=[("E", "v" * (1 << 20))])), want="MAX_ARG_STRLEN")
        self.post_json("100k categories", STUDIES, json.dumps(study(studySpec={
            "metrics": [{"metricId": "m", "goal": "MAXIMIZE"}],
            "parameters": [{"parameterId": "c", "categoricalValueSpec": {
                "values": ["v%d" % i for i in range(100000)]}}]})), want="at most 1000 categories")
        self.post_json("10k metrics", STUDIES, json.dumps(study(studySpec={
            "metrics": [{"metricId": "m%d" % i, "goal": "MAXIMIZE"} for i in range(10000)],
            "parameters": [{"parameterId": "x", "doubleValueSpec": {"minValue": 0, "maxValue": 1}}]})),
            want="at most 100 metrics")
        job = container_job("x", "true")
        job["labels"] = {"k%d" % i: "v" for i in range(200000)}
        self.post_json("200k labels (Vertex allows 64)", JOBS, json.dumps(job))
        self.post_json("1M-item array body", JOBS, "[" + ",".join(["1"] * (1 << 20)) + "]")
        self.post_json("10k parameters", STUDIES, json.dumps(study(studySpec={
            "metrics": [{"metricId": "m", "goal": "MAXIMIZE"}],
            "parameters": [{"parameterId": "p%d" % i, "discreteValueSpec": {"values": list(range(100))}}
                           for i in range(10000)], "algorithm": "GRID_SEARCH"})),
            want="at most 100 parameters")
        self.post_json("1e6 discrete values", STUDIES, json.dumps(study(studySpec={
            "metrics": [{"metricId": "m", "goal": "MAXIMIZE"}],
            "parameters": [{"parameterId": "x", "discreteValueSpec": {"values": [1] * 1000000}}]})))
        # Numbers at and past the edges.
        for count in ("9223372036854775808", "-1", "1e308", "NaN", "0x10", "99999999999999999999999"):
            job = container_job("x", "true")
            job["jobSpec"]["workerPoolSpecs"][0]["replicaCount"] = count
            self.post_json("replicaCount " + count, JOBS, json.dumps(job))
        job = container_job("x", "true", accelerator=("NVIDIA_TESLA_T4", 2 ** 40))
        self.post_json("2^40 GPUs", JOBS, json.dumps(job))
        for timeout in ("1e400s", "-1s", "NaNs", "s", "99999999999999999999s"):
            # google.protobuf.Duration caps at 315576000000s.
            self.post_json("timeout " + timeout, JOBS, json.dumps(container_job("x", "true", timeout=timeout)))
        self.post_json("maxTrialCount 2^63", STUDIES, json.dumps(study(maxTrialCount=2 ** 63)))
        self.post_json("number 1e999", JOBS, '{"displayName": 1e999, "jobSpec": {}}')

    def test_body_over_the_size_limit(self):
        limit = 256 << 20  # for JSON requests; object data and packages stream (docs/storage.md)
        # Declared up front: refused from the header alone, before any body.
        self.check("Content-Length over the limit", self.request(
            "POST", JOBS, headers={"Content-Length": str(limit + 1)}), want="larger than")
        self.check("Content-Length 2^64-1", self.request(
            "POST", JOBS, headers={"Content-Length": str(2 ** 64 - 1)}))
        # A streamed upload the disk cannot hold: refused before any body.
        for target in ("/v1/stoker/staging", "/upload/storage/v1/b/bkt/o?name=big"):
            self.check("upload of 2^64-1 bytes to " + target, self.request(
                "POST", target, headers={"Content-Length": str(2 ** 64 - 1)}),
                want="larger than the free space")
        # Chunked, so the server only learns the size while reading.
        chunk = b"%x\r\n%s\r\n" % (1 << 20, b"x" * (1 << 20))
        head = (b"POST /v1/projects/p/locations/l/customJobs HTTP/1.1\r\nHost: x\r\n"
                b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
        # The server must read 256 MiB to learn it is too big: on a loaded
        # 2-core machine that alone took 10.4 s, so this case is bounded by
        # the transfer, not by HANG (a hang still fails at the 60 s timeout).
        self.check("chunked body over the limit",
                   self.exchange(head, timeout=60, stream=(chunk for _ in range(300))), limit=55)
        self.assertFalse(os.path.exists(os.path.join(self.data, "buckets", "bkt", "big")))

    def test_invalid_utf8(self):
        self.post_json("invalid UTF-8 in displayName", JOBS, b'{"displayName":"\xff\xfe","jobSpec":{}}')
        self.post_json("overlong UTF-8", JOBS, b'{"displayName":"\xc0\xaf","jobSpec":{}}')
        self.post_json("lone surrogate escape", JOBS,
                       json.dumps(container_job("x", "true")).replace('"x"', '"\\ud800"', 1).encode())
        self.post_json("invalid UTF-8 in bucket name", "/storage/v1/b", b'{"name":"b\xff\xff"}')
        self.post_json("UTF-16 body", JOBS, json.dumps(container_job("x", "true")).encode("utf-16"))
        self.check("invalid UTF-8 filter", self.request("GET", JOBS + "?filter=state%3D%ff"))
        self.check("invalid UTF-8 bucket in path", self.request("GET", "/storage/v1/b/%ff%fe%fd/o"))
        self.check("invalid UTF-8 project", self.request("POST", "/v1/projects/%ff%fe/locations/l/customJobs",
                                                         json.dumps(container_job("x", "true"))))
        self.check("raw 0xff bytes in the target", self.request("GET", b"/storage/v1/b/\xff\xfe/o"))

    # ---- malformed HTTP ----

    def test_malformed_http(self):
        raw = [
            ("garbage request line", b"GARBAGE\r\n\r\n"),
            ("binary junk", b"\x00\xff\x16\x03\x01" * 100 + b"\r\n\r\n"),
            ("TLS client hello", bytes.fromhex("16030100a5010000a10303") + b"\0" * 100 + b"\r\n\r\n"),
            ("HTTP/9.9", b"GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n"),
            ("no version", b"GET /healthz\r\n\r\n"),
            ("header without colon", b"GET /healthz HTTP/1.1\r\nHost x\r\n\r\n"),
            ("space before colon", b"GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n"),
            ("NUL in target", b"GET /heal\x00thz HTTP/1.1\r\nHost: x\r\n\r\n"),
            ("NUL in header", b"GET /healthz HTTP/1.1\r\nHost: x\x00y\r\n\r\n"),
            ("negative Content-Length", b"POST /storage/v1/b HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n"),
            ("non-numeric Content-Length", b"POST /storage/v1/b HTTP/1.1\r\nHost: x\r\nContent-Length: ab\r\n\r\n"),
            ("two Content-Lengths", b"POST /storage/v1/b HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
                                    b"Content-Length: 2\r\n\r\nab"),
            ("Content-Length and chunked", b"POST /storage/v1/b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                                           b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
            ("bad chunk size", b"POST /storage/v1/b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                               b"zz\r\nabc\r\n0\r\n\r\n"),
            ("huge chunk size", b"POST /storage/v1/b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                                b"ffffffffffffffffff\r\nabc\r\n"),
            ("unknown transfer coding", b"POST /storage/v1/b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n"),
            ("bare LF line ends", b"GET /healthz HTTP/1.1\nHost: x\n\n"),
        ]
        for what, data in raw:
            self.check(what, self.exchange(data))
        # RFC 9112 lets a server accept an obs-fold by reading it as a space.
        self.check("obs-fold header", self.exchange(b"GET /healthz HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n"),
                   allowed=(200,))
        self.check("header over 64 KiB", self.request("GET", "/healthz", headers={"X-Big": "a" * (65 << 10)}),
                   want="header")
        self.check("many headers over 64 KiB",
                   self.exchange(b"GET /healthz HTTP/1.1\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(20000))
                                 + b"\r\n"))
        self.check("target over 64 KiB", self.request("GET", "/" + "a" * (70 << 10)))
        # Slowloris: partial requests that stop or vanish must not starve others.
        idle = []
        for i in range(64):
            s = socket.create_connection(self.addr, timeout=5)
            s.sendall(b"POST /storage/v1/b HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{" if i % 2
                      else b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            idle.append(s)
        self.check("a normal request while 64 partial ones hang", self.request("GET", JOBS + "/abc"))
        for s in idle[:32]:
            s.close()  # closed early, mid-request
        for s in idle[32:]:
            s.shutdown(socket.SHUT_WR)  # half-closed: the server sees EOF mid-request
        self.check("after the partial requests went away", self.request("GET", JOBS + "/abc"))
        for s in idle[32:]:
            s.close()
        self.check("request then RST", self.request("GET", JOBS + "/abc"))
        s = socket.create_connection(self.addr)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
        s.sendall(b"POST /storage/v1/b HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{\"na")
        s.close()  # RST
        self.assertTrue(self.healthy())

    # ---- routes, methods, ids, paging ----

    def test_unknown_routes_wrong_methods_bad_ids_and_paging(self):
        # (GET / is the web console: test_console.py checks it.)
        cases = [
            ("GET", "/v2/projects"), ("GET", "/healthz/x"), ("GET", "*"),
            ("GET", "http://evil.example/healthz/../x"), ("GET", "/..%2f..%2fetc%2fpasswd"),
            ("GET", "/v1/projects/p/locations/l/customJobs/1/../../../../etc/passwd"),
            ("GET", "/storage/v1/b/" + "a" * 60000 + "/o"),
            ("GET", "/storage/v1/b/bkt/o/" + "a" * 60000),
            ("GET", JOBS + "/" + "1" * 60000),
            ("GET", JOBS + "/" + "a" * 60000 + "/logs"),
            ("POST", "/v1/projects/p/locations/l/studies/1/trials/" + "1" * 60000 + ":addTrialMeasurement"),
            ("DELETE", JOBS), ("PUT", JOBS), ("PATCH", JOBS + "/1"), ("DELETE", JOBS + "/1"),
            ("GET", JOBS + "/1:cancel"), ("POST", JOBS + "/1/events"), ("PUT", "/storage/v1/b"),
            ("DELETE", "/storage/v1/b/bkt/o/x"), ("GET", "/upload/storage/v1/b/bkt/o?name=x"),
            ("FOO", JOBS), ("DELETE", STUDIES), ("PUT", STUDIES + "/1"),
            ("GET", "/v1/stoker/staging"),
        ]
        for method, path in cases:
            self.check("%s %s" % (method, path[:80]), self.request(method, path))
        for bad in ("abc", "-1", "0", "1e3", "0x10", "%20", "1%00", "99999999999999999999999",
                    "9223372036854775807", "-9223372036854775808", "1.5", "%2e%2e"):
            self.check("job id " + bad, self.request("GET", JOBS + "/" + bad))
            self.check("cancel job id " + bad, self.request("POST", JOBS + "/" + bad + ":cancel"))
            self.check("logs of job id " + bad, self.request("GET", JOBS + "/" + bad + "/logs"))
            self.check("study id " + bad, self.request("GET", STUDIES + "/" + bad))
        for q in ("pageSize=-1", "pageSize=abc", "pageSize=99999999999999999999", "pageSize=1.5",
                  "pageSize=", "pageToken=-5", "pageToken=abc", "pageToken=99999999999999999999999",
                  "pageToken=%ff", "pageToken=1%00", "filter=" + "%20" * 30000 + "x",
                  "filter=state%3D" + "A" * 30000, "filter=" + "(" * 10000):
            self.check("list jobs ?" + q[:60], self.request("GET", JOBS + "?" + q))
            self.check("list studies ?" + q[:60], self.request("GET", STUDIES + "?" + q))
        # A real job: its logs with hostile offsets and replica names.
        jid = self.submit(container_job("ok", "echo hi"))
        self.wait_state(jid)
        for q in ("replica=../../../outside/secret", "replica=workerpool0-0%00", "replica=" + "a" * 60000,
                  "replica=workerpool0-0&offset=-1", "replica=workerpool0-0&offset=abc",
                  "replica=workerpool0-0&offset=99999999999999999999999"):
            self.check("logs ?" + q[:60], self.request("GET", JOBS + "/" + jid + "/logs?" + q))

    def test_unauthenticated_and_forged_credentials(self):
        """Without a valid token every route but /healthz answers 401 (a
        measurement push needs its trial's key instead),
        the body is not read into anything, and nothing is created."""
        token = self.daemon.token
        forged = [
            None, "", "Bearer", "Bearer ", "Basic YWRtaW46YWRtaW4=", "bearer " + token + "x",
            "Bearer " + token[:-1], "Bearer " + token.upper(), "Bearer stk_" + "0" * 64,
            "Bearer " + "stk_" + "a" * 60000, "Bearer " + token + "\x00", "Bearer %s %s" % (token, token),
            "Bearer " + "\u00e9".encode().decode("latin-1") * 100,
        ]
        targets = [("GET", JOBS), ("POST", JOBS), ("GET", JOBS + "/1"), ("POST", JOBS + "/1:cancel"),
                   ("GET", "/storage/v1/b"), ("POST", "/storage/v1/b"), ("GET", "/v1/admin/users"),
                   ("POST", "/v1/admin/users"), ("POST", "/v1/stoker/staging"), ("GET", "/v1/whoami"),
                   ("POST", "/upload/storage/v1/b/bkt/o?name=x"), ("GET", "/nope")]
        body = json.dumps(container_job("x", "echo pwned")).encode()
        for value in forged:
            for method, path in targets:
                headers = {} if value is None else {"Authorization": value}
                status, answer = self.check("%s %s with %r" % (method, path, (value or "")[:40]),
                                            self.request(method, path, body, headers, auth=False))
                # 400: a header value HTTP itself forbids (a NUL) never reaches the API.
                self.assertIn(status, (400, 401), answer[:300])
                if status == 401:
                    self.assertIn(b"UNAUTHENTICATED", answer)
                self.assertNotIn(token.encode(), answer)
        # A measurement push without a token needs its trial's key.
        measure = "/v1/projects/p/locations/l/studies/1/trials/1:addTrialMeasurement"
        for query in ("", "?key=", "?key=" + "0" * 64, "?key=" + "a" * 60000, "?key=%00",
                      "?key=" + token[4:]):
            status, answer = self.check("anonymous measurement " + query[:20], self.request(
                "POST", measure + query, '{"measurement":{"metrics":[{"metricId":"m","value":1}]}}',
                auth=False))
            self.assertIn(status, (401, 414), query[:20])
            if status == 401:
                self.assertIn(b"trial's key", answer)
        status, answer = self.api("GET", JOBS)
        self.assertEqual(answer.get("customJobs", []), [], "an unauthenticated submit got through")

    def test_out_of_range_study_ids(self):
        for bad in ("0", "-1", "99999999999999999999999"):
            self.check("measurement for study " + bad, self.request(
                "POST", "/v1/projects/p/locations/l/studies/%s/trials/%s:addTrialMeasurement" % (bad, bad),
                '{"measurement":{"metrics":[{"metricId":"m","value":1}]}}'))

    # ---- storage: traversal in object and bucket names ----

    def test_path_traversal_in_bucket_object_names(self):
        self.assertEqual(self.api("POST", "/storage/v1/b", {"name": "bkt"})[0], 200)
        up = "/upload/storage/v1/b/bkt/o?name="
        names = ["../../../outside/evil", "..%2f..%2f..%2foutside%2fevil", "%2e%2e/%2e%2e/%2e%2e/outside/evil",
                 "%2E%2E%2F%2E%2E%2F%2E%2E%2Foutside%2Fevil", "a/../../../../outside/evil", "..", ".", "a/./b",
                 "a/.", "../", "/" + self.outside.lstrip("/") + "/evil", "%2F" + self.outside.lstrip("/") + "/evil",
                 "//" + self.outside.lstrip("/") + "/evil", "evil%00.txt", "a%00/../../../outside/evil", "",
                 "a//b", "a/", "..%5c..%5coutside%5cevil"]
        for name in names:
            status, _ = self.check("upload " + name, self.request("POST", up + name, b"EVIL"),
                                   allowed=(200,) if name in ("a//b", "a/", "..%5c..%5coutside%5cevil") else ())
        for name in ("..%2f..%2f..%2foutside%2fsecret", "%2e%2e/%2e%2e/%2e%2e/outside/secret",
                     "../../../outside/secret", self.outside + "/secret", "%2F" + self.outside.lstrip("/") + "/secret",
                     "a%00", "..", "."):
            self.check("read " + name, self.request("GET", "/storage/v1/b/bkt/o/" + name + "?alt=media"))
        for bucket in ("..", "%2e%2e", "...", "a%2fb", "%00ab", "-" * 64, "UPPER", "a" * 64):
            self.check("bucket " + bucket, self.request("POST", "/upload/storage/v1/b/%s/o?name=x" % bucket, b"x"),
                       allowed=(200,) if bucket == "..." else ())
            self.check("list bucket " + bucket, self.request("GET", "/storage/v1/b/%s/o" % bucket),
                       allowed=(200,) if bucket == "..." else ())
            self.check("create bucket " + bucket, self.request(
                "POST", "/storage/v1/b", json.dumps({"name": urllib.parse.unquote(bucket)})),
                allowed=(200, 409) if bucket == "..." else ())
        for prefix in ("../../outside", "%2e%2e/%2e%2e/outside", "/etc", "\0"):
            status, body = self.check("list prefix " + prefix, self.request(
                "GET", "/storage/v1/b/bkt/o?prefix=" + urllib.parse.quote(prefix)), allowed=(200,))
            if status == 200:
                self.assertNotIn(b"secret", body)
        # gs:// URIs in job fields that point out of a bucket.
        for uri in ("gs://bkt/../../outside", "gs://../outside", "gs://bkt/a\0b"):
            self.post_json("output dir " + uri, JOBS, json.dumps(
                dict(container_job("x", "true"), jobSpec=dict(container_job("x", "true")["jobSpec"],
                                                              baseOutputDirectory={"outputUriPrefix": uri}))))
            self.post_json("package " + uri, JOBS, json.dumps(package_job(uri)))

    def test_issue_14_inputs(self):
        """The hostile inputs of issue #14 that need no trainer: each is a 4xx
        naming what is wrong, fast, with the daemon alive."""
        def job_with(**pool_extra):
            j = container_job("x", "true")
            j["jobSpec"]["workerPoolSpecs"][0].update(pool_extra)
            return j
        for point in ("../../outside/evil", "/etc/stoker-evil", "a/b", "..", ".", "x" * 256):
            self.post_json("nfsMounts.mountPoint " + point[:40], JOBS, json.dumps(job_with(
                nfsMounts=[{"server": "10.0.0.1", "path": self.outside, "mountPoint": point}])),
                want="mountPoint")
        # $(VAR) chains: each level multiplies the size by ten.
        for levels in (6, 10, 30):
            env = [{"name": "V0", "value": "x" * 100}] + [
                {"name": "V%d" % i, "value": "$(V%d)" % (i - 1) * 10} for i in range(1, levels)]
            j = container_job("x", "true")
            j["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["env"] = env
            self.post_json("env expansion %d levels" % levels, JOBS, json.dumps(j),
                           want="after $(VAR) expansion")
        for name in ("a\nb", "row\n1 JOB_STATE_SUCCEEDED", "\x1b[2Jclear", "tab\there", "nul\x00"):
            self.post_json("displayName %r" % name, JOBS, json.dumps(container_job(name, "true")),
                           want="displayName")
        for module in ("../../x", "/etc/passwd", "a..b", "a b", "1abc", ".x", "x."):
            j = package_job("gs://pkgs/p.tar.gz")
            j["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["pythonModule"] = module
            self.post_json("pythonModule " + module, JOBS, json.dumps(j), want="pythonModule")
        for name in ("a" * 256, "d/" + "b" * 300 + "/c"):
            self.check("object name part of %d bytes" % len(name), self.request(
                "POST", "/upload/storage/v1/b/bkt/o?name=" + name, b"x"), want="255")
        self.check("upload into staging", self.request(
            "POST", "/upload/storage/v1/b/stoker-staging/o?name=" + "0" * 64 + ".tar.gz", b"x"),
            want="written only by staging")

    # ---- archives ----

    def refuse_package(self, what, data, want=None, timeout=HANG):
        """Stages `data` and submits a job that runs it: both must be refused."""
        self.check("stage " + what, self.request("POST", "/v1/stoker/staging", data, timeout=timeout),
                   want=want, limit=timeout)
        status, _, _ = self.request("POST", "/upload/storage/v1/b/pkgs/o?name=p.tar.gz", data)
        self.assertEqual(status, 200, what)
        self.check("submit " + what, self.request("POST", JOBS, json.dumps(package_job("gs://pkgs/p.tar.gz")),
                                                  timeout=timeout), want=want, limit=timeout)

    def test_hostile_archives(self):
        self.refuse_package("symlink to /etc/passwd", targz([("pkg/trainer", "dir", None),
                                                              ("pkg/trainer/x", "sym", "/etc/passwd")]), "absolute")
        self.refuse_package("symlink up and out", targz([("pkg", "dir", None),
                                                         ("pkg/up", "sym", "../../../outside")]), "outside")
        self.refuse_package("file through a symlink", targz([("pkg", "dir", None), ("pkg/l", "sym", "."),
                                                             ("pkg/l/f", "file", "x")]), "symlink")
        self.refuse_package("symlink dir then write", targz([("d", "sym", "../" + self.outside),
                                                             ("d/evil", "file", "x")]))
        self.refuse_package("dot-dot entry", targz([("../../outside/evil", "file", "x")]), "'..'")
        self.refuse_package("absolute entry", targz([(self.outside + "/evil", "file", "x")]), "absolute")
        self.refuse_package("hard link to /etc/passwd", targz([("h", "hard", "/etc/passwd")]))
        self.refuse_package("hard link up", targz([("h", "hard", "../outside/secret")]))
        self.refuse_package("device file", targz([("dev", "chr", None)]), "device")
        self.refuse_package("fifo", targz([("fifo", "fifo", None)]), "fifo")
        self.refuse_package("not gzip", b"PK\x03\x04 this is a zip", "gzip")
        self.refuse_package("gzip of garbage", gzip.compress(os.urandom(4096)))
        self.refuse_package("truncated", targz([("a", "file", "x" * 10000)])[:60])
        self.refuse_package("empty archive", targz([]), "no entries")
        self.refuse_package("declared 5 GiB entry", declared_bomb(5 << 30), "unpacks to more than")
        # 100 001 empty files: past the entry limit.
        self.refuse_package("100001 entries", entry_bomb(100001), "entries")
        # A real bomb, 4.5 GiB of zeros in ~5 MiB: the check has to inflate
        # the first 2.25 GiB to reach the second header, and refuses there.
        # That costs seconds of CPU per request (see docs/security.md), so
        # this one case gets 60 s rather than 10.
        self.refuse_package("4.5 GiB of zeros", zero_bomb([36 * (64 << 20), 36 * (64 << 20)]),
                            "unpacks to more than", timeout=60)
        # Nothing was unpacked or staged for any of them.
        self.assertEqual(os.listdir(os.path.join(self.data, "staging")) if os.path.isdir(
            os.path.join(self.data, "staging")) else [], [])
        self.assertEqual(self.api("GET", JOBS)[1]["customJobs"], [])
        used = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(self.data) for f in fs)
        self.assertLess(used, 64 << 20, "the data dir grew by %d bytes" % used)


if __name__ == "__main__":
    unittest.main()
