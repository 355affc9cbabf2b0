"""GET /metrics scraped by a real Prometheus server (Debian's prometheus).

A Prometheus on a free loopback port scrapes stokerd every second with a
viewer's bearer token (authorization.credentials_file); the test then reads
the values back through Prometheus' HTTP API and compares them with what
stokerd's own API says: jobs by state, the queue, the histograms, the GPUs
booked and busy (the fake NVML: an H100 37% busy with 1 GiB in use, an idle
T4) and each running replica's GPU numbers.
"""
import json
import os
import shutil
import socket
import subprocess
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

from harness import StokerTestCase, container_job, read_text, skip_or_fail, wait_for

FAKE_NVML = os.path.join(os.path.dirname(os.path.abspath(__import__("harness").STOKER)), "..",
                         "src", "resources", "libfake_nvml_for_test.so")
STATES = ["JOB_STATE_QUEUED", "JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED",
          "JOB_STATE_FAILED", "JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_scrape(text):
    """{'name{labels}': value} of a text-format scrape."""
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            samples[key] = float(value)
    return samples


class Prometheus:
    """A Prometheus server scraping `target` (host:port) every second."""

    def __init__(self, workdir, target, token):
        self.dir = os.path.join(workdir, "prometheus")
        os.makedirs(self.dir)
        token_file = os.path.join(self.dir, "viewer.token")
        with open(token_file, "w") as f:
            f.write(token)
        os.chmod(token_file, 0o600)
        self.config = os.path.join(self.dir, "prometheus.yml")
        with open(self.config, "w") as f:
            f.write("""
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: stoker
    metrics_path: /metrics
    authorization:
      type: Bearer
      credentials_file: %s
    static_configs:
      - targets: ["%s"]
""" % (token_file, target))
        self.proc = None

    def start(self):
        binary = shutil.which("prometheus")
        # A port taken between free_port() and the bind: try another.
        for _ in range(3):
            port = free_port()
            self.url = "http://127.0.0.1:%d" % port
            self.log = open(os.path.join(self.dir, "prometheus.log"), "ab")
            self.proc = subprocess.Popen(
                [binary, "--config.file=" + self.config,
                 "--storage.tsdb.path=" + os.path.join(self.dir, "data"),
                 "--web.listen-address=127.0.0.1:%d" % port],
                stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                wait_for(self._ready, 60, "Prometheus to be ready")
                return self
            except AssertionError:
                self.stop()
                if "address already in use" not in read_text(self.log.name):
                    raise AssertionError("Prometheus did not start:\n" +
                                         read_text(self.log.name)[-3000:])
        raise AssertionError("Prometheus found no free port")

    def _ready(self):
        if self.proc.poll() is not None:
            raise AssertionError("prometheus exited with %s" % self.proc.returncode)
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as r:
                return r.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def query(self, promql):
        """The instant vector of `promql` as {frozenset(labels): value}."""
        url = self.url + "/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.loads(r.read())
        if body["status"] != "success":
            raise AssertionError("query %s: %s" % (promql, body))
        return {frozenset((k, v) for k, v in s["metric"].items() if k != "__name__"):
                float(s["value"][1]) for s in body["data"]["result"]}

    def value(self, promql):
        """The one value of `promql`, or None while it has none."""
        result = self.query(promql)
        if len(result) > 1:
            raise AssertionError("%s has %d series: %s" % (promql, len(result), result))
        return next(iter(result.values())) if result else None


class PrometheusScrapeTest(StokerTestCase):
    config = StokerTestCase.config + """
inventory: {cpus: 32, memory_gb: 256}
gpu_telemetry_seconds: 0.5
"""

    def setUp(self):
        if shutil.which("prometheus") is None or shutil.which("promtool") is None:
            skip_or_fail(self, "Debian's prometheus package is missing: run "
                               "scripts/install-deps.sh --test")
        if not os.path.exists(FAKE_NVML):
            self.fail("the fake NVML library is not built: " + FAKE_NVML)
        os.environ["STOKER_NVML_LIBRARY"] = os.path.abspath(FAKE_NVML)
        try:
            super().setUp()
        finally:
            del os.environ["STOKER_NVML_LIBRARY"]
        self.prometheus = None

    def tearDown(self):
        if self.prometheus:
            self.prometheus.stop()
        super().tearDown()

    def scrape(self, token=None):
        req = urllib.request.Request(self.daemon.url + "/metrics", headers={
            "authorization": "Bearer " + (token or self.daemon.token)})
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.read().decode()

    def jobs_by_state(self):
        status, body = self.api("GET", self.project_path + "?pageSize=1000")
        self.assertEqual(status, 200, body)
        counts = dict.fromkeys(STATES, 0)
        for j in body.get("customJobs", []):
            counts[j["state"]] += 1
        return counts

    def test_prometheus_scrapes_jobs_queue_histograms_and_gpus_as_stokerd_reports_them(self):
        started = time.time()
        # One finished job (on the T4), then: the H100 and the T4 held by
        # running jobs, a CPU job running, and two H100 jobs queued behind.
        done = self.submit(container_job("done", "true", machine="n1-standard-4",
                                         accelerator=("NVIDIA_TESLA_T4", 1)))
        self.assertEqual(self.wait_state(done)["state"], "JOB_STATE_SUCCEEDED")
        h100 = self.submit(container_job("h100", "sleep 600", machine="a3-highgpu-1g",
                                         accelerator=("NVIDIA_H100_80GB", 1)))
        t4 = self.submit(container_job("t4", "sleep 600", machine="n1-standard-4",
                                       accelerator=("NVIDIA_TESLA_T4", 1)))
        cpu = self.submit(container_job("cpu", "sleep 600"))
        for j in (h100, t4, cpu):
            self.wait_state(j, ("JOB_STATE_RUNNING",))
        before_queued = time.time()
        queued = [self.submit(container_job("wait%d" % i, "sleep 600", machine="a3-highgpu-1g",
                                            accelerator=("NVIDIA_H100_80GB", 1)))
                  for i in range(2)]
        wait_for(lambda: len(self.api("GET", "/v1/stoker/queue")[1].get("jobs", [])) == 2, 30,
                 "two jobs in `stoker queue`")

        # A viewer's token, as the docs tell an operator to make one.
        self.stoker("admin", "users", "add", "prometheus", "--role", "viewer")
        viewer = self.stoker("admin", "users", "token", "prometheus").stdout.strip()
        me = self.api("GET", "/v1/whoami")[1]["user"]

        # The text itself passes promtool's lint.
        text = self.scrape(viewer)
        check = subprocess.run([shutil.which("promtool"), "check", "metrics"], input=text,
                               capture_output=True, text=True)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr + text)
        self.assertNotIn('job_id="%s"' % done, text)  # nothing per finished job

        self.prometheus = Prometheus(self.tmp, self.daemon.url.split("//", 1)[1], viewer).start()
        prom = self.prometheus
        wait_for(lambda: prom.value('up{job="stoker"}') == 1, 60, "Prometheus to scrape stokerd")

        # Jobs by state: what Prometheus stored equals what the API lists.
        expected = self.jobs_by_state()
        self.assertEqual(expected["JOB_STATE_RUNNING"], 3, expected)
        self.assertEqual(expected["JOB_STATE_QUEUED"], 2, expected)
        self.assertEqual(expected["JOB_STATE_SUCCEEDED"], 1, expected)

        def by_state():
            got = {dict(k)["state"]: v for k, v in prom.query("stoker_jobs").items()}
            return got if got == {s: float(n) for s, n in expected.items()} else None
        wait_for(by_state, 60, "stoker_jobs in Prometheus to equal the API's %s" % expected)

        queue = self.api("GET", "/v1/stoker/queue")[1]["jobs"]
        self.assertEqual(prom.value("stoker_queue_length"), len(queue))
        self.assertEqual({q["jobId"] for q in queue}, set(queued))
        oldest = prom.value("stoker_queue_oldest_wait_seconds")
        self.assertGreater(oldest, 0)
        self.assertLessEqual(oldest, time.time() - before_queued + 1)

        # Every job that started counted once in the submit-to-start histogram.
        status, body = self.api("GET", self.project_path + "?pageSize=1000")
        ran = sum(1 for j in body["customJobs"] if j.get("startTime"))
        self.assertEqual(ran, 4)
        self.assertEqual(prom.value("stoker_job_submit_to_start_seconds_count"), ran)
        self.assertEqual(prom.value('stoker_job_submit_to_start_seconds_bucket{le="+Inf"}'), ran)
        self.assertGreater(prom.value("stoker_scheduling_pass_duration_seconds_count"), 0)
        p99 = prom.value("histogram_quantile(0.99, stoker_scheduling_pass_duration_seconds_bucket)")
        self.assertIsNotNone(p99)

        # GPUs: booked as `stoker nodes` shows them; busy from the fake NVML.
        nodes = self.api("GET", "/v1/stoker/nodes")[1]["nodes"]
        booked = sum(min(1.0, sum(h["fraction"] for h in g["holders"]))
                     for n in nodes for g in n["gpus"])
        self.assertEqual(booked, 2)
        wait_for(lambda: prom.value("stoker_gpus_allocated") == booked, 30,
                 "stoker_gpus_allocated to be %s" % booked)
        self.assertEqual(prom.value("stoker_gpus"), 2)
        wait_for(lambda: prom.value("stoker_gpus_busy") is not None, 30, "a GPU sample")
        self.assertAlmostEqual(prom.value("stoker_gpus_busy"), 0.37, places=6)
        self.assertAlmostEqual(prom.value('stoker_gpu_utilization_ratio{gpu="0"}'), 0.37, places=6)
        self.assertEqual(prom.value('stoker_gpu_memory_used_bytes{gpu="0"}'), 1 << 30)
        self.assertEqual(prom.value('stoker_gpu_allocated_ratio{gpu="1"}'), 1)

        # Per running replica: the device numbers of the GPU its allocation holds.
        util = prom.query("stoker_replica_gpu_utilization_ratio")
        labels = {dict(k)["job_id"]: dict(k) for k in util}
        self.assertEqual(set(labels), {h100, t4})  # not the CPU job, not the finished one
        self.assertEqual(labels[h100], {"instance": self.daemon.url.split("//", 1)[1],
                                        "job": "stoker", "job_id": h100, "user": me, "pool": "0",
                                        "replica": "workerpool0-0", "gpu": "0"})
        self.assertAlmostEqual(util[frozenset(labels[h100].items())], 0.37, places=6)
        self.assertEqual(util[frozenset(labels[t4].items())], 0)
        self.assertEqual(prom.value('stoker_replica_gpu_memory_used_bytes{job_id="%s"}' % h100),
                         1 << 30)
        self.assertEqual(prom.value('stoker_replica_gpu_allocated_ratio{job_id="%s"}' % t4), 1)
        self.assertEqual(prom.query('{job_id="%s"}' % done), {})

        # Daemon health.
        self.assertEqual(prom.value("stoker_store_up"), 1)
        self.assertEqual(prom.value("count(stoker_build_info == 1)"), 1)
        start = prom.value("stoker_start_time_seconds")
        self.assertLessEqual(start, started + 1)
        self.assertGreater(start, started - 120)
        self.assertLess(prom.value("stoker_control_loop_last_pass_age_seconds"), 30)
        self.assertGreater(prom.value('stoker_http_requests_total{code="2xx"}'), 0)
        self.assertGreater(prom.value("stoker_control_loop_passes_total"), 0)

        # A job that ends leaves the per-replica families (Prometheus marks them stale).
        self.stoker("jobs", "cancel", t4)
        self.wait_state(t4, ("JOB_STATE_CANCELLED",))
        wait_for(lambda: not prom.query('stoker_replica_gpu_utilization_ratio{job_id="%s"}' % t4),
                 60, "the cancelled job's series to go stale")
        wait_for(lambda: prom.value('stoker_jobs{state="JOB_STATE_CANCELLED"}') == 1, 60,
                 "the cancelled job to be counted")


if __name__ == "__main__":
    unittest.main()
