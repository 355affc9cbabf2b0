#!/usr/bin/env python3
"""What a pull costs a job, and what requirements in a container cost
(issue #16): a real registry (Debian's docker-registry on localhost) holds
the base image of scripts/container-base-image.sh (Debian, Python, numpy,
PyTorch: about 1.4 GB); for each round the image (every tag of it, so its
layers too) is removed from podman's
store and a job naming it in the registry is submitted, then a second job
with the image now in the store. Reported per job: submit -> trainer start
(createTime -> startTime) and the pull time the job's events give. Then a
pythonPackageSpec job in the image with one requirement from a wheelhouse,
twice: the environment built by the image's pip, then reused (the times
its events give).

  bench/containers/pull.py [--rounds 3] [--bin-dir build/bin]

Needs root, podman, docker-registry and the base image.
"""
import argparse
import base64
import datetime
import hashlib
import io
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import tarfile
import tempfile
import time
import urllib.request
import zipfile

BASE = "localhost/stoker-base:bookworm"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def podman(*args):
    return subprocess.run(["podman", *args], capture_output=True, text=True)


def ulimits():
    import resource
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
    nproc = [min(v, 32768) if v != resource.RLIM_INFINITY else 32768
             for v in resource.getrlimit(resource.RLIMIT_NPROC)]
    return ["--ulimit=nofile=%d:%d" % nofile, "--ulimit=nproc=%d:%d" % tuple(nproc)]


class Daemon:
    def __init__(self, bin_dir, data, config):
        os.makedirs(data)
        with open(os.path.join(data, "config.yaml"), "w") as f:
            f.write(config)
        self.data = data
        self.proc = subprocess.Popen(
            [os.path.join(bin_dir, "stokerd"), "--data-dir", data, "--listen", "127.0.0.1:0",
             "--runner", os.path.join(bin_dir, "stoker-run")],
            stdout=open(os.path.join(data, "stokerd.log"), "w"), stderr=subprocess.STDOUT)
        addr = os.path.join(data, "stokerd.addr")
        for _ in range(400):
            if os.path.exists(addr) and os.path.getsize(addr):
                break
            time.sleep(0.05)
        self.url = open(addr).read().strip()  # http://HOST:PORT
        self.token = open(os.path.join(data, "token")).read().strip()

    def api(self, method, path, body=None):
        req = urllib.request.Request(
            self.url + path, data=json.dumps(body).encode() if body else None, method=method,
            headers={"content-type": "application/json", "authorization": "Bearer " + self.token})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read() or b"{}")

    def run(self, pool):
        jobs = "/v1/projects/p/locations/l/customJobs"
        j = self.api("POST", jobs, {"displayName": "bench", "jobSpec": {
            "workerPoolSpecs": [pool], "scheduling": {"maxRetries": 0}}})
        job_id = j["name"].rsplit("/", 1)[1]
        deadline = time.time() + 900
        while time.time() < deadline:
            j = self.api("GET", jobs + "/" + job_id)
            if j["state"] in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"):
                break
            time.sleep(0.2)
        if j["state"] != "JOB_STATE_SUCCEEDED":
            raise SystemExit("job %s ended %s: %s" % (job_id, j["state"], j.get("error")))
        events = [e["reason"] for e in self.api("GET", jobs + "/" + job_id + "/events")["events"]]
        return j, "\n".join(events)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


def seconds(rfc3339):
    return datetime.datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def wheel(directory, name, source):
    dist = "%s-1.0.dist-info" % name
    files = {name + ".py": source,
             dist + "/METADATA": "Metadata-Version: 2.1\nName: %s\nVersion: 1.0\n" % name,
             dist + "/WHEEL": "Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n"}
    record = ["%s,sha256=%s,%d" % (p, base64.urlsafe_b64encode(
        hashlib.sha256(t.encode()).digest()).rstrip(b"=").decode(), len(t)) for p, t in files.items()]
    files[dist + "/RECORD"] = "\n".join(record + [dist + "/RECORD,,"]) + "\n"
    os.makedirs(directory, exist_ok=True)
    with zipfile.ZipFile(os.path.join(directory, name + "-1.0-py3-none-any.whl"), "w") as z:
        for p, t in files.items():
            z.writestr(p, t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bin-dir", default=os.path.join(os.path.dirname(__file__), "../../build/bin"))
    a = ap.parse_args()
    bin_dir = os.path.abspath(a.bin_dir)
    if podman("image", "exists", BASE).returncode != 0:
        raise SystemExit("no %s (scripts/container-base-image.sh)" % BASE)
    tmp = tempfile.mkdtemp(prefix="stoker-pull-bench-")
    os.chmod(tmp, 0o711)
    port = free_port()
    registry = "127.0.0.1:%d" % port
    with open(os.path.join(tmp, "registry.yml"), "w") as f:
        f.write("version: 0.1\nlog: {level: warn}\nstorage:\n  filesystem:\n"
                "    rootdirectory: %s/store\nhttp:\n  addr: %s\n" % (tmp, registry))
    reg = subprocess.Popen(["docker-registry", "serve", os.path.join(tmp, "registry.yml")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    image = registry + "/bench/base:v1"
    daemon = None
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        t = time.time()
        r = podman("push", "--tls-verify=false", BASE, image)
        if r.returncode != 0:
            raise SystemExit("push failed: " + r.stderr)
        print("pushed %s to %s in %.1f s" % (BASE, image, time.time() - t))
        daemon = Daemon(bin_dir, os.path.join(tmp, "data"),
                        'containers: {insecure_registries: ["%s"]}\n' % registry)
        pool = {"machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 1,
                "containerSpec": {"imageUri": image, "command": ["true"]}}
        pulled, present, pull_times = [], [], []
        for n in range(a.rounds):
            # Every tag of the image's ID goes, so that its layers go too and
            # the pull fetches them all (the base comes back at the end).
            podman("rmi", "--force", image, BASE)
            if n:  # stokerd trusts "in the store" for 30 s
                time.sleep(31)
            j, events = daemon.run(pool)
            m = re.search(r"pulled image \S+ in ([0-9.]+) s", events)
            pull_times.append(float(m.group(1)))
            pulled.append(seconds(j["startTime"]) - seconds(j["createTime"]))
            j, events = daemon.run(pool)
            assert "pulled image" not in events
            present.append(seconds(j["startTime"]) - seconds(j["createTime"]))
            print("round %d: pulled job submit->start %.2f s (pull %.1f s); image present %.3f s"
                  % (n + 1, pulled[-1], pull_times[-1], present[-1]))
        print("p50 submit->start: pulled %.2f s (pull alone %.1f s), present %.3f s"
              % (statistics.median(pulled), statistics.median(pull_times),
                 statistics.median(present)))

        # Requirements by the image's pip: built once, then reused.
        wheels = os.path.join(daemon.data, "wheelhouse")
        wheel(wheels, "stoker_bench_req", "VALUE = 1\n")
        pkg = os.path.join(daemon.data, "buckets", "pkgs")
        os.makedirs(pkg, exist_ok=True)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for rel, text in (("b-0.1/PKG-INFO", "Metadata-Version: 2.1\nName: b\nVersion: 0.1\n"
                               "Requires-Dist: stoker_bench_req\n"),
                              ("b-0.1/setup.py", ""), ("b-0.1/t.py", "import stoker_bench_req\n")):
                info = tarfile.TarInfo(rel)
                info.size = len(text)
                tar.addfile(info, io.BytesIO(text.encode()))
        with open(os.path.join(pkg, "b-0.1.tar.gz"), "wb") as f:
            f.write(buf.getvalue())
        ppool = {"machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 1,
                 "pythonPackageSpec": {"executorImageUri": image,
                                       "packageUris": ["gs://pkgs/b-0.1.tar.gz"],
                                       "pythonModule": "t"}}
        for what in ("built", "reused"):
            j, events = daemon.run(ppool)
            m = re.search(r"environment [0-9a-f]{12} (built|reused) in ([0-9.]+) (s|ms)", events)
            print("requirements in the image: %s in %s %s (submit->start %.2f s)"
                  % (m.group(1), m.group(2), m.group(3),
                     seconds(j["startTime"]) - seconds(j["createTime"])))
    finally:
        if daemon:
            daemon.stop()
        if podman("image", "exists", BASE).returncode != 0:
            podman("pull", "--tls-verify=false", image)
            podman("tag", image, BASE)
        reg.terminate()
        reg.wait()
        podman("rmi", "--force", image)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
