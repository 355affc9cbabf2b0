"""The web console (docs/console.md) in a real headless Chromium against a
real stokerd: sign-in (a bad token, then a good one), the jobs list, a
running job's log arriving line by line, its charts, cancel from the page,
a viewer who cannot cancel (no enabled button, and the server refuses a
forged request), the cookie's CSRF rule, a job that does not exist.

Needs Debian's chromium, chromium-driver and python3-selenium
(scripts/install-deps.sh --test); skips without them unless
STOKER_TEST_REQUIRE_ALL=1. Screenshots go to $STOKER_ARTIFACTS_DIR, else
<repo>/build/artifacts/console/.
"""
import json
import math
import os
import shutil
import unittest
import urllib.error
import urllib.request

import harness

try:
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
except ImportError:  # reported by setUp
    webdriver = None

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
WAIT = 60  # seconds, generous for ASan builds; every wait polls, none sleeps

# A trainer that prints a numbered line every 0.2 s and reports a
# hypertune metric (the file every replica is told of) every other line.
TRAINER = r"""
i=0
while [ $i -lt 600 ]; do
  i=$((i+1))
  echo "console line $i"
  if [ $((i % 2)) -eq 0 ]; then
    mkdir -p "$(dirname "$CLOUD_ML_HP_METRIC_FILE")"
    echo "{\"timestamp\": $(date +%s).0, \"trial\": \"0\", \"loss\": \"$((1000 / i))\", \"global_step\": \"$i\"}" >> "$CLOUD_ML_HP_METRIC_FILE"
  fi
  sleep 0.2
done
"""


def artifacts_dir():
    d = os.environ.get("STOKER_ARTIFACTS_DIR") or os.path.join(
        harness.SOURCE, "build", "artifacts", "console")
    os.makedirs(d, exist_ok=True)
    return d


class ConsoleBase(harness.StokerTestCase):
    """A stokerd and headless Chromium browsers (helpers; no tests here)."""

    def setUp(self):
        if webdriver is None:
            harness.skip_or_fail(self, "python3-selenium is not installed "
                                 "(scripts/install-deps.sh --test)")
        if not CHROMIUM or not CHROMEDRIVER:
            harness.skip_or_fail(self, "chromium and chromium-driver are not installed "
                                 "(scripts/install-deps.sh --test)")
        super().setUp()
        self.drivers = []

    def tearDown(self):
        for d in self.drivers:
            try:
                d.quit()
            except WebDriverException:
                pass
        super().tearDown()

    # ---- helpers ----

    def browser(self):
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--window-size=1400,1000", "--no-first-run", "--disable-extensions",
                    "--user-data-dir=" + os.path.join(self.tmp, "chrome-%d" % len(self.drivers))):
            options.add_argument(arg)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        d = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        d.set_script_timeout(WAIT)
        d.set_page_load_timeout(WAIT)
        self.drivers.append(d)
        return d

    def until(self, driver, predicate, what, timeout=WAIT):
        """Polls predicate(driver) (exceptions count as not yet). When it
        times out, the page as it was is kept beside the screenshots
        (<test>-timeout.png and .html) and the message names them."""
        def probe():
            try:
                return predicate(driver)
            except WebDriverException:
                return None
        try:
            return harness.wait_for(probe, timeout, what)
        except AssertionError as e:
            base = os.path.join(artifacts_dir(), self.id().rsplit(".", 1)[-1] + "-timeout")
            try:
                driver.save_screenshot(base + ".png")
                with open(base + ".html", "w") as f:
                    f.write(driver.page_source)
            except (WebDriverException, OSError) as kept:
                base = "not kept: %s" % kept
            raise AssertionError("%s (the page: %s.png/.html)" % (e, base)) from e

    def text(self, driver, css):
        found = driver.find_elements(By.CSS_SELECTOR, css)
        return found[0].text if found else ""

    def shot(self, driver, name):
        driver.save_screenshot(os.path.join(artifacts_dir(), name + ".png"))

    def add_user(self, name, role):
        status, body = self.api("POST", "/v1/admin/users", {"name": name, "role": role})
        self.assertEqual(status, 200, body)
        status, body = self.api("POST", "/v1/admin/users/%s/tokens" % name, {})
        self.assertEqual(status, 200, body)
        return body["token"]

    def sign_in(self, driver, token):
        driver.get(self.daemon.url + "/")
        box = self.until(driver, lambda d: d.find_element(By.ID, "token"), "the sign-in form")
        box.clear()
        box.send_keys(token)
        driver.find_element(By.ID, "signin-button").click()

    def raw(self, method, path, headers):
        """A request with exactly `headers` (no token added): (status, body)."""
        req = urllib.request.Request(self.daemon.url + path, method=method, headers=headers,
                                     data=b"" if method == "POST" else None)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def session_of(self, driver):
        """The browser's cookie header and CSRF value, as a forger who stole both would hold."""
        cookie = driver.get_cookie("stoker_session")
        self.assertIsNotNone(cookie, "no session cookie after sign-in")
        self.assertTrue(cookie["httpOnly"])
        self.assertEqual(cookie.get("sameSite"), "Strict")
        csrf = driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "fetch('/console/session').then(r => r.json()).then(j => done(j.csrf));")
        return "stoker_session=" + cookie["value"], csrf

    def job_path(self, job_id):
        return self.project_path + "/" + job_id



class ConsoleTest(ConsoleBase):

    def test_a_user_follows_a_running_job_and_cancels_it(self):
        ada = self.add_user("ada", "user")
        status, body = self.api("POST", self.project_path,
                                harness.container_job("console-train", TRAINER), token=ada)
        self.assertEqual(status, 200, body)
        job_id = body["name"].rsplit("/", 1)[1]
        harness.wait_for(lambda: self.job(job_id)["state"] == "JOB_STATE_RUNNING", WAIT,
                         "the job to run")

        d = self.browser()
        # A bad token: a clear message on the page, no cookie.
        self.sign_in(d, "stk_" + "0" * 64)
        message = self.until(d, lambda d: self.text(d, "#signin-error"), "a sign-in error")
        self.assertIn("Sign-in failed", message)
        self.assertIsNone(d.get_cookie("stoker_session"))
        self.sign_in(d, ada)
        self.until(d, lambda d: d.find_element(By.CSS_SELECTOR, "tr[data-job='%s']" % job_id),
                   "the job in the jobs list")
        self.assertIn("ada (user)", self.text(d, "#who"))
        self.shot(d, "jobs")

        d.find_element(By.CSS_SELECTOR, "tr[data-job='%s'] a" % job_id).click()
        self.until(d, lambda d: d.find_element(By.ID, "job-head").get_attribute("data-state")
                   == "JOB_STATE_RUNNING", "the job page")
        # The log follows: a line, then later lines, without reloading.
        first = self.until(d, lambda d: [l for l in self.text(d, "#log").splitlines()
                                         if l.startswith("console line")], "log lines")
        seen = int(first[-1].split()[-1])
        self.until(d, lambda d: "console line %d" % (seen + 3) in self.text(d, "#log"),
                   "line %d to arrive after line %d" % (seen + 3, seen))

        # Training metrics: the trainer's hypertune reports as chart points.
        self.until(d, lambda d: int(d.find_element(
            By.CSS_SELECTOR, "#metrics svg.chart[data-points]").get_attribute("data-points")) >= 2,
            "training-metric chart points")
        self.assertGreater(len(d.find_elements(By.CSS_SELECTOR, "#metrics svg.chart circle.pt")), 1)
        self.assertIn("loss", self.text(d, "#metrics"))
        # Telemetry: the replica's CPU samples.
        self.until(d, lambda d: int(d.find_element(
            By.CSS_SELECTOR, "#telemetry svg.chart[data-points]").get_attribute("data-points")) >= 1,
            "telemetry chart points", timeout=WAIT * 2)
        self.shot(d, "job-running")

        # From the page itself, a cookie POST without the CSRF header is refused.
        status = d.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "fetch(arguments[1], {method: 'POST'}).then(r => done(r.status));",
            self.job_path(job_id) + ":cancel")
        self.assertEqual(status, 403)
        self.assertEqual(self.job(job_id)["state"], "JOB_STATE_RUNNING")

        # Cancel with the button.
        button = d.find_element(By.ID, "cancel")
        self.assertTrue(button.is_enabled())
        button.click()
        self.until(d, lambda d: d.switch_to.alert, "the confirmation").accept()
        self.wait_state(job_id, ("JOB_STATE_CANCELLED",), timeout=WAIT)
        try:
            self.until(d, lambda d: d.find_element(By.ID, "job-head").get_attribute("data-state")
                       == "JOB_STATE_CANCELLED", "the page to show CANCELLED")
        except AssertionError:
            self.shot(d, "failed-job-cancelled")
            raise
        self.shot(d, "job-cancelled")

        # Sign out: the cookie is gone, and the session with it: a copy of
        # the cookie taken before (a thief's) opens nothing.
        stolen, _ = self.session_of(d)
        self.assertNotIn(ada[4:], stolen)  # a session id, never the token
        d.find_element(By.ID, "signout").click()
        self.until(d, lambda d: d.find_element(By.ID, "token"), "the sign-in form after sign-out")
        self.assertIsNone(d.get_cookie("stoker_session"))
        self.assertEqual(self.raw("GET", self.project_path, {"Cookie": stolen})[0], 401)

    def test_a_viewer_sees_but_cannot_cancel(self):
        viewer = self.add_user("val", "viewer")
        job_id = self.submit(harness.container_job("console-view", TRAINER))
        harness.wait_for(lambda: self.job(job_id)["state"] == "JOB_STATE_RUNNING", WAIT,
                         "the job to run")
        d = self.browser()
        self.sign_in(d, viewer)
        self.until(d, lambda d: "val (viewer)" in self.text(d, "#who"), "the viewer signed in")
        d.get(self.daemon.url + "/#/jobs/" + job_id)
        self.until(d, lambda d: d.find_element(By.ID, "job-head").get_attribute("data-state")
                   == "JOB_STATE_RUNNING", "the job page")
        self.until(d, lambda d: "console line" in self.text(d, "#log"), "the viewer sees the log")
        buttons = d.find_elements(By.ID, "cancel")
        self.assertTrue(not buttons or not buttons[0].is_enabled(), "a viewer's cancel button works")
        self.shot(d, "job-viewer")

        # A forged request with the viewer's cookie and even its CSRF value: refused.
        cookie, csrf = self.session_of(d)
        path = self.job_path(job_id) + ":cancel"
        host = self.daemon.url.split("://", 1)[1]
        status, body = self.raw("POST", path, {"Cookie": cookie, "X-Stoker-CSRF": csrf, "Host": host})
        self.assertEqual(status, 403, body)
        self.assertIn("viewer", json.loads(body)["error"]["message"])
        # Without the CSRF header, or from another origin: refused before the role check.
        status, body = self.raw("POST", path, {"Cookie": cookie, "Host": host})
        self.assertEqual(status, 403, body)
        self.assertIn("X-Stoker-CSRF", json.loads(body)["error"]["message"])
        status, _ = self.raw("GET", self.job_path(job_id),
                             {"Cookie": cookie, "Origin": "https://evil.example", "Host": host})
        self.assertEqual(status, 403)
        self.assertEqual(self.job(job_id)["state"], "JOB_STATE_RUNNING")
        # A bearer request needs no CSRF header: the admin cancels.
        status, body = self.api("POST", path)
        self.assertEqual(status, 200, body)
        self.wait_state(job_id, ("JOB_STATE_CANCELLED",), timeout=WAIT)

    def test_a_study_page_ranks_trials(self):
        trainer = ("import sys, hypertune\n"
                   "a = dict(x.lstrip('-').split('=', 1) for x in sys.argv[1:])\n"
                   "v = float(a['x']) * int(a['n'])\n"
                   "hypertune.HyperTune().report_hyperparameter_tuning_metric("
                   "hyperparameter_metric_tag='score', metric_value=v, global_step=1)\n")
        self.api("POST", "/storage/v1/b", {"name": "hpt"})
        body = {
            "displayName": "console-study", "maxTrialCount": 3, "parallelTrialCount": 3,
            "studySpec": {
                "metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
                "parameters": [
                    {"parameterId": "x", "doubleValueSpec": {"minValue": 0.0, "maxValue": 1.0}},
                    {"parameterId": "n", "integerValueSpec": {"minValue": 1, "maxValue": 5}},
                    {"parameterId": "lr", "doubleValueSpec": {"minValue": 1e-4, "maxValue": 1e-1},
                     "scaleType": "UNIT_LOG_SCALE"}],
                "algorithm": "RANDOM_SEARCH"},
            "trialJobSpec": {"workerPoolSpecs": [{
                "machineSpec": {"machineType": "e2-standard-2"}, "replicaCount": 1,
                "containerSpec": {"imageUri": harness.IMAGE,
                                  "command": ["python3", "-c", trainer]}}],
                "baseOutputDirectory": {"outputUriPrefix": "gs://hpt/out/"}},
        }
        status, reply = self.api("POST", "/v1/projects/p/locations/l/hyperparameterTuningJobs", body)
        self.assertEqual(status, 200, reply)
        sid = reply["name"].rsplit("/", 1)[1]
        study = harness.wait_for(lambda: (lambda s: s if s["state"] == "JOB_STATE_SUCCEEDED" else None)(
            self.api("GET", "/v1/projects/p/locations/l/hyperparameterTuningJobs/" + sid)[1]),
            WAIT * 2, "the study to succeed")
        scores = {t["id"]: t["finalMeasurement"]["metrics"][0]["value"] for t in study["trials"]}
        best = max(scores, key=scores.get)
        d = self.browser()
        self.sign_in(d, self.daemon.token)
        self.until(d, lambda d: "admin" in self.text(d, "#who"), "the admin signed in")
        d.get(self.daemon.url + "/#/studies")
        self.until(d, lambda d: d.find_element(By.CSS_SELECTOR, "#studies a[href='#/studies/%s']" % sid),
                   "the study in the list").click()
        rows = self.until(d, lambda d: (lambda r: r if len(r) == 3 else None)(
            d.find_elements(By.CSS_SELECTOR, "#trials tbody tr")), "3 trials")
        # Ranked by the metric, best first (MAXIMIZE), and highlighted.
        self.assertEqual(rows[0].get_attribute("data-trial"), best)
        self.assertIn("best-row", rows[0].get_attribute("class"))
        self.assertIn("trial " + best, self.text(d, "#best"))
        # The study's usage: its trials' replica-hours, as the API counts them.
        hours = self.until(d, lambda d: d.find_element(
            By.CSS_SELECTOR, "#study-usage td[data-k='replicaHours']").text, "the study's usage")
        self.assertAlmostEqual(float(hours), study["stoker"]["usage"]["replicaHours"],
                               delta=study["stoker"]["usage"]["replicaHours"] * 0.01)  # 3 digits shown
        d.find_element(By.CSS_SELECTOR, "#trials th[data-key='metric']").click()
        self.until(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#trials tbody tr")[-1]
                   .get_attribute("data-trial") == best, "the ascending sort")
        charts = d.find_elements(By.CSS_SELECTOR, "#study-charts svg.chart")
        self.assertEqual(len(charts), 4)  # the metric by trial, then x, n and lr against it
        for c in charts:
            self.assertGreaterEqual(int(c.get_attribute("data-points")), 3)
        by_title = {c.get_attribute("aria-label"): c for c in charts}
        # Each parameter in its own scale: log-scaled lr on a log axis, x linear.
        self.assertEqual(by_title["score against lr"].get_attribute("data-log-x"), "1")
        self.assertEqual(by_title["score against x"].get_attribute("data-log-x"), "0")
        lrs = {t["id"]: next(p["value"] for p in t["parameters"] if p["parameterId"] == "lr")
               for t in study["trials"]}
        cx = {}
        for c in by_title["score against lr"].find_elements(By.CSS_SELECTOR, "circle.pt"):
            label = c.find_element(By.TAG_NAME, "title").get_attribute("textContent")
            cx[label.split(":")[0].split()[1]] = float(c.get_attribute("cx"))
        self.assertEqual(set(cx), set(lrs))
        lo, hi = min(lrs, key=lrs.get), max(lrs, key=lrs.get)
        span = math.log10(lrs[hi]) - math.log10(lrs[lo])
        for t, v in lrs.items():  # where each point sits: a fraction of the log span
            self.assertAlmostEqual((cx[t] - cx[lo]) / (cx[hi] - cx[lo]),
                                   (math.log10(v) - math.log10(lrs[lo])) / span, delta=0.01)
        # Parallel coordinates: a line per trial over x, n, lr (log) and the
        # objective; the best trial's line stands out.
        pc = d.find_element(By.CSS_SELECTOR, "#study-parallel svg.parallel")
        self.assertEqual(pc.get_attribute("data-lines"), "3")
        self.assertEqual(pc.get_attribute("data-axes"), "4")
        self.assertEqual(pc.find_element(By.CSS_SELECTOR, "g[data-axis='lr']")
                         .get_attribute("data-scale"), "log")
        self.assertEqual(pc.find_element(By.CSS_SELECTOR, ".best-line").get_attribute("data-trial"),
                         best)
        self.shot(d, "study")
        self.brush_parallel_coordinates(d, scores, best)

        # Compare two trials: their curves overlaid, their parameters and
        # objective side by side.
        button = d.find_element(By.ID, "compare-trials")
        self.assertFalse(button.is_enabled())
        rows = d.find_elements(By.CSS_SELECTOR, "#trials tbody tr")
        picked = [r.get_attribute("data-trial") for r in rows[:2]]
        for r in rows[:2]:
            r.find_element(By.CSS_SELECTOR, "input.pick").click()
        self.assertEqual(button.text, "Compare 2 selected")
        button.click()
        table = self.until(d, lambda d: (lambda r: r if len(r) == 2 else None)(
            d.find_elements(By.CSS_SELECTOR, "#compare-table tbody tr")), "2 runs compared")
        shown = {r.find_element(By.TAG_NAME, "a").text: r.text for r in table}
        self.assertEqual(set(shown), {"trial " + t for t in picked})
        headers = [h.text for h in d.find_elements(By.CSS_SELECTOR, "#compare-table th")]
        for h in ("score (objective)", "x", "n", "lr"):
            self.assertIn(h, headers)
        for t in picked:
            self.assertIn("%.4g" % scores[t], shown["trial " + t].replace("e-0", "e-"))
        overlay = self.until(d, lambda d: d.find_element(
            By.CSS_SELECTOR, "#compare-metrics svg.chart[aria-label='score (hypertune)']"),
            "the overlaid metric")
        self.assertEqual(overlay.get_attribute("data-series"), "2")
        self.shot(d, "compare-trials")

    def brush_parallel_coordinates(self, d, scores, best):
        """Brushing the study's parallel coordinates (docs/console.md): a drag
        on an axis keeps the trials in its range, dims the others' lines and
        filters the trials table; a second drag replaces the brush; Escape,
        Delete and a click clear; the keyboard brushes too."""
        pc = lambda: d.find_element(By.CSS_SELECTOR, "#study-parallel svg.parallel")
        hit = lambda axis: pc().find_element(By.CSS_SELECTOR, ".pc-hit[data-axis='%s']" % axis)
        metric, top, bottom = "__metric", 44, 232  # the axes run from y 44 to 232 of 260
        scale = pc().size["height"] / 260.0

        def y_at(trial, axis):  # where the trial's line crosses the axis
            x = float(pc().find_element(By.CSS_SELECTOR, "g[data-axis='%s'] line" % axis).get_attribute("x1"))
            line = pc().find_element(By.CSS_SELECTOR, ".pc-line[data-trial='%s']" % trial)
            points = [tuple(map(float, p.split(","))) for p in line.get_attribute("points").split()]
            return next(py for px, py in points if abs(px - x) < 0.5)

        def drag(axis, y0, y1):
            h = hit(axis)
            centre = float(h.get_attribute("y")) + float(h.get_attribute("height")) / 2
            ActionChains(d).move_to_element_with_offset(h, 0, (y0 - centre) * scale) \
                .click_and_hold().move_by_offset(0, (y1 - y0) * scale / 2) \
                .move_by_offset(0, (y1 - y0) * scale / 2).release().perform()

        def kept(n, brushes):
            return self.until(d, lambda d: pc() if pc().get_attribute("data-selected") == str(n) and
                              pc().get_attribute("data-brushes") == str(brushes) else None,
                              "%d trials kept by %d brushes" % (n, brushes))

        def table():
            return sorted(r.get_attribute("data-trial")
                          for r in d.find_elements(By.CSS_SELECTOR, "#trials tbody tr"))

        # The objective's axis (MAXIMIZE: the best on top) brushed from its top
        # to halfway to the runner-up: the best trial alone.
        ys = {t: y_at(t, metric) for t in scores}
        runner_up = min(ys[t] for t in ys if t != best)
        drag(metric, top - 4, (ys[best] + runner_up) / 2)
        svg_el = kept(1, 1)
        dimmed = {l.get_attribute("data-trial") for l in svg_el.find_elements(By.CSS_SELECTOR, ".pc-line.dimmed")}
        self.assertEqual(dimmed, set(scores) - {best})
        self.assertNotIn("dimmed", svg_el.find_element(By.CSS_SELECTOR, ".best-line").get_attribute("class"))
        self.assertEqual(table(), [best])
        self.assertIn("1 of 3 trials in the brushed ranges (score)", self.text(d, "#brush-note"))
        d.execute_script("arguments[0].scrollIntoView()", d.find_element(By.ID, "study-parallel"))
        self.shot(d, "study-brushed")

        # A second drag on the same axis replaces its brush: all three kept.
        drag(metric, bottom + 4, top - 4)
        svg_el = kept(3, 1)
        rect = svg_el.find_element(By.CSS_SELECTOR, ".pc-brush[data-axis='%s']" % metric)
        self.assertAlmostEqual(float(rect.get_attribute("height")), bottom - top, delta=1)
        self.assertEqual(len(table()), 3)
        # Escape (the brushed axis has the focus) clears every brush.
        self.assertEqual(d.switch_to.active_element.get_attribute("data-axis"), metric)
        ActionChains(d).send_keys(Keys.ESCAPE).perform()
        kept(3, 0)
        self.assertFalse(d.find_element(By.ID, "brush-note").is_displayed())

        # From the keyboard: ↑ on the x axis makes a brush; the lines kept and
        # the table are the trials whose x lies in it; Delete clears it.
        d.execute_script("arguments[0].focus()", hit("x"))
        ActionChains(d).send_keys(Keys.ARROW_UP, Keys.ARROW_UP, "+").perform()
        svg_el = self.until(d, lambda d: pc() if pc().get_attribute("data-brushes") == "1" else None,
                            "a brush from the keyboard")
        rect = svg_el.find_element(By.CSS_SELECTOR, ".pc-brush[data-axis='x']")
        y, h = float(rect.get_attribute("y")), float(rect.get_attribute("height"))
        inside = sorted(t for t in scores if y - 0.1 <= y_at(t, "x") <= y + h + 0.1)
        self.assertEqual(svg_el.get_attribute("data-selected"), str(len(inside)))
        self.assertEqual(table(), inside)
        self.assertEqual(d.switch_to.active_element.get_attribute("data-axis"), "x")
        ActionChains(d).send_keys(Keys.DELETE).perform()
        kept(3, 0)

        # A drag on two axes keeps what both keep; a click on one axis clears
        # only its brush; the button under the heading clears the rest.
        drag("x", top - 4, bottom + 4)
        drag(metric, top - 4, (ys[best] + runner_up) / 2)
        kept(1, 2)
        self.assertEqual(table(), [best])
        ActionChains(d).move_to_element(hit(metric)).click().perform()
        kept(3, 1)
        d.find_element(By.ID, "clear-brushes").click()
        kept(3, 0)
        self.assertEqual(len(table()), 3)

    def test_pages_without_data(self):
        # The page needs no token and carries its security headers.
        req = urllib.request.Request(self.daemon.url + "/")
        with urllib.request.urlopen(req, timeout=30) as r:
            self.assertEqual(r.status, 200)
            self.assertTrue(r.headers["Content-Type"].startswith("text/html"))
            self.assertIn("frame-ancestors 'none'", r.headers["Content-Security-Policy"])
            self.assertIn("script-src 'self'", r.headers["Content-Security-Policy"])
            self.assertEqual(r.headers["X-Frame-Options"], "DENY")
            self.assertIsNone(r.headers["Access-Control-Allow-Origin"])
        d = self.browser()
        self.sign_in(d, self.daemon.token)
        self.until(d, lambda d: "admin" in self.text(d, "#who"), "the admin signed in")
        # A job that does not exist (or was deleted): "not found".
        d.get(self.daemon.url + "/#/jobs/987654")
        d.refresh()
        message = self.until(d, lambda d: self.text(d, "#not-found"), "'not found'")
        self.assertIn("not found", message)
        for page, css in (("queue", "#queue"), ("nodes", "#nodes"), ("studies", "#studies")):
            d.get(self.daemon.url + "/#/" + page)
            self.until(d, lambda d: d.find_element(By.CSS_SELECTOR, css), "the %s page" % page)
        self.shot(d, "nodes")
        # No script error on any page.
        # (Answers such as the 404 above are logged as failed loads; they are expected.)
        errors = [e for e in d.get_log("browser") if e["level"] == "SEVERE"
                  and "Failed to load resource" not in e["message"]]
        self.assertEqual(errors, [])


if __name__ == "__main__":
    unittest.main()
