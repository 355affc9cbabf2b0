"""Requirement environments: build once vs reuse (issue #16: reuse < 50 ms).

Runs the real stoker-run in the foreground on replica directories whose
launch.json has a package requiring wheels of a wheelhouse this script
writes, and reads the line stoker-run writes to output.log:
  stoker-run: requirements [...]: environment KEY built in 1.2 s | reused in 4 ms
It also times stoker-run as a whole, the same replica with and without
"python_env", so that the reuse overhead on a replica's start is visible,
and starts many replicas at once on an empty cache (built once).

  python3 bench/python_env/bench.py --bin-dir build/bin [--runs 30] [--builds 3]
"""
import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile

PYTHON = "/usr/bin/python3"
LINE = re.compile(r"^stoker-run: requirements \[.*\]: environment ([0-9a-f]{12}) "
                  r"(built|reused) in ([0-9.]+) (s|ms)", re.M)


def wheel(directory, name, version, source, requires=()):
    dist = "%s-%s.dist-info" % (name, version)
    files = {name + ".py": source,
             dist + "/METADATA": "Metadata-Version: 2.1\nName: %s\nVersion: %s\n%s" % (
                 name, version, "".join("Requires-Dist: %s\n" % r for r in requires)),
             dist + "/WHEEL": "Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n"}
    record = ["%s,sha256=%s,%d" % (p, base64.urlsafe_b64encode(
        hashlib.sha256(t.encode()).digest()).rstrip(b"=").decode(), len(t.encode()))
              for p, t in files.items()]
    files[dist + "/RECORD"] = "\n".join(record + [dist + "/RECORD,,"]) + "\n"
    with zipfile.ZipFile(os.path.join(directory, "%s-%s-py3-none-any.whl" % (name, version)),
                         "w") as z:
        for p, t in files.items():
            z.writestr(p, t)


def sdist(path, requires):
    top = "benchpkg-0.1"
    with tempfile.TemporaryDirectory() as d:
        files = {top + "/PKG-INFO": "Metadata-Version: 2.1\nName: benchpkg\nVersion: 0.1\n",
                 top + "/benchpkg.egg-info/requires.txt": "".join(r + "\n" for r in requires),
                 top + "/trainer/__init__.py": "", top + "/trainer/task.py": "print('ok')\n"}
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
            with open(os.path.join(d, rel), "w") as f:
                f.write(text)
        with tarfile.open(path, "w:gz") as tar:
            tar.add(os.path.join(d, top), arcname=top)


def replica(root, name, package, python_env):
    d = os.path.join(root, name)
    os.makedirs(d, mode=0o755)
    spec = {"argv": [PYTHON, "-c", "import trainer.task"],
            "env": {"PATH": "/usr/bin:/bin"}, "packages": [package]}
    if python_env:
        spec["python_env"] = python_env
    with open(os.path.join(d, "launch.json"), "w") as f:
        json.dump(spec, f)
    return d


def run(stoker_run, d):
    t0 = time.monotonic()
    subprocess.run([stoker_run, "--replica-dir", d], check=True)
    wall = (time.monotonic() - t0) * 1000
    with open(os.path.join(d, "status.json")) as f:
        status = json.load(f)
    with open(os.path.join(d, "output.log")) as f:
        log = f.read()
    if status["state"] != "exited" or status["exit_code"] != 0:
        sys.exit("replica %s failed: %s\n%s" % (d, status, log))
    m = LINE.search(log)
    ms = None
    if m:
        ms = float(m.group(3)) * (1000 if m.group(4) == "s" else 1)
    return wall, (m.group(2) if m else None), ms


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", default="build/bin")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--builds", type=int, default=3)
    ap.add_argument("--at-once", type=int, default=8)
    ap.add_argument("--out", help="write the results as JSON here")
    a = ap.parse_args()
    stoker_run = os.path.abspath(os.path.join(a.bin_dir, "stoker-run"))
    work = tempfile.mkdtemp(prefix="stoker-bench-pyenv-")
    try:
        wheels = os.path.join(work, "wheelhouse")
        os.makedirs(wheels)
        # A top-level requirement with four dependencies, and numpy, which
        # Debian's python3 already has (pip checks it, installs nothing).
        deps = ["stoker_bench_dep%d" % i for i in range(4)]
        for dep in deps:
            wheel(wheels, dep, "1.0", "VALUE = 1\n")
        wheel(wheels, "stoker_bench_top", "1.0",
              "".join("import %s\n" % d for d in deps), deps)
        package = os.path.join(work, "benchpkg-0.1.tar.gz")
        sdist(package, ["stoker_bench_top", "numpy"])

        def python_env(cache):
            return {"cache_dir": cache, "python": PYTHON, "find_links": [wheels],
                    "index_url": "", "requirements": []}

        builds = []
        for i in range(a.builds):
            cache = os.path.join(work, "cache-build-%d" % i)
            wall, what, ms = run(stoker_run, replica(work, "build-%d" % i, package,
                                                     python_env(cache)))
            assert what == "built", what
            builds.append({"env_ms": ms, "stoker_run_wall_ms": wall})

        cache = os.path.join(work, "cache-build-0")
        reuse_env, reuse_wall, plain_wall = [], [], []
        for i in range(a.runs):
            wall, what, ms = run(stoker_run, replica(work, "reuse-%d" % i, package,
                                                     python_env(cache)))
            assert what == "reused", what
            reuse_env.append(ms)
            reuse_wall.append(wall)
            wall, what, _ = run(stoker_run, replica(work, "plain-%d" % i, package, None))
            assert what is None
            plain_wall.append(wall)

        # Many replicas at once on an empty cache.
        cache = os.path.join(work, "cache-at-once")
        dirs = [replica(work, "once-%d" % i, package, python_env(cache)) for i in range(a.at_once)]
        t0 = time.monotonic()
        procs = [subprocess.Popen([stoker_run, "--replica-dir", d]) for d in dirs]
        for p in procs:
            p.wait()
        batch_ms = (time.monotonic() - t0) * 1000
        kinds = []
        for d in dirs:
            with open(os.path.join(d, "output.log")) as f:
                m = LINE.search(f.read())
            kinds.append(m.group(2) if m else "none")

        results = {
            "build_env_ms": [b["env_ms"] for b in builds],
            "build_stoker_run_wall_ms": [round(b["stoker_run_wall_ms"], 1) for b in builds],
            "reuse_env_ms_p50": pct(reuse_env, 50), "reuse_env_ms_p99": pct(reuse_env, 99),
            "reuse_env_ms_max": max(reuse_env),
            "stoker_run_wall_ms_with_env_p50": round(pct(reuse_wall, 50), 1),
            "stoker_run_wall_ms_without_env_p50": round(pct(plain_wall, 50), 1),
            "at_once": a.at_once, "at_once_built": kinds.count("built"),
            "at_once_reused": kinds.count("reused"), "at_once_wall_ms": round(batch_ms, 1),
            "runs": a.runs,
        }
        print(json.dumps(results, indent=2))
        print("\nbuild (pip, 5 wheels + numpy already installed): env %s ms (median %.0f)"
              % (results["build_env_ms"], statistics.median(results["build_env_ms"])))
        print("reuse: env p50 %s ms, p99 %s ms, max %s ms (%d runs)" % (
            results["reuse_env_ms_p50"], results["reuse_env_ms_p99"],
            results["reuse_env_ms_max"], a.runs))
        print("stoker-run wall p50: %.1f ms with a reused env, %.1f ms without python_env" % (
            results["stoker_run_wall_ms_with_env_p50"],
            results["stoker_run_wall_ms_without_env_p50"]))
        print("%d at once on an empty cache: %d built, %d reused, %.0f ms for all" % (
            a.at_once, results["at_once_built"], results["at_once_reused"], batch_ms))
        if a.out:
            with open(a.out, "w") as f:
                json.dump(results, f, indent=2)
                f.write("\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
