"""The web console from the keyboard and its contrast (docs/console.md), in
a real headless Chromium against a real stokerd, at a laptop's 1366x768:
sign in, skip to the content, move between pages, sort a table and work a
chart without a mouse, every focused control visibly outlined; every text
on the jobs, job, usage and nodes pages at least WCAG AA contrast
(4.5:1, 3:1 for large text), in light and dark colour schemes. Skips like
test_console.py without Chromium."""
import unittest

import harness
from test_console import ConsoleBase, TRAINER

try:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
except ImportError:  # ConsoleBase.setUp reports it
    pass

# Every visible text (HTML and SVG) whose contrast with what is behind it
# is below WCAG AA: [text, ratio, needed].
LOW_CONTRAST = r"""
function rgba(s) {
  const m = /rgba?\(([^)]+)\)/.exec(s);
  if (!m) return null;
  const v = m[1].split(/[ ,\/]+/).filter(Boolean).map(Number);
  return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1];
}
function lum(c) {
  const f = (x) => { x /= 255; return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); };
  return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
}
function over(top, bottom) {
  const a = top[3];
  return [0, 1, 2].map((i) => top[i] * a + bottom[i] * (1 - a)).concat([1]);
}
function background(e) {
  const layers = [];
  for (let n = e; n && n.nodeType === 1; n = n.parentElement) {
    const b = rgba(getComputedStyle(n).backgroundColor);
    if (b && b[3] > 0) layers.push(b);
    if (b && b[3] === 1) break;
  }
  let c = [255, 255, 255, 1];
  const root = rgba(getComputedStyle(document.documentElement).backgroundColor);
  if (root && root[3] === 1) c = root;
  for (const l of layers.reverse()) c = over(l, c);
  return c;
}
const out = [];
for (const e of document.querySelectorAll("body *")) {
  if (e.closest("[hidden], noscript, title, option")) continue;
  const own = [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
  if (!own) continue;
  const r = e.getBoundingClientRect();
  if (!r.width || !r.height || e.matches(":disabled") || e.closest("button:disabled")) continue;
  const cs = getComputedStyle(e);
  if (cs.visibility !== "visible" || Number(cs.opacity) === 0) continue;
  const isSvg = e instanceof SVGElement;
  let fg = rgba(isSvg ? cs.fill : cs.color);
  if (!fg) continue;
  const bg = background(isSvg ? e.ownerSVGElement : e);
  fg = over(fg, bg);
  const l1 = lum(fg), l2 = lum(bg);
  const ratio = (Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05);
  const px = parseFloat(cs.fontSize);
  const large = px >= 24 || (px >= 18.66 && Number(cs.fontWeight) >= 700);
  const need = large ? 3 : 4.5;
  if (ratio < need - 0.01) out.push([e.textContent.trim().slice(0, 40), Math.round(ratio * 100) / 100, need]);
}
return out;
"""


class ConsoleA11yTest(ConsoleBase):

    def focused(self, d):
        return d.switch_to.active_element

    def assert_outlined(self, d):
        e = self.focused(d)
        style = d.execute_script("const s = getComputedStyle(arguments[0]);"
                                 "return [s.outlineStyle, parseFloat(s.outlineWidth)];", e)
        self.assertNotEqual(style[0], "none", e.get_attribute("outerHTML")[:120])
        self.assertGreaterEqual(style[1], 2)

    def tab_to(self, d, predicate, what, limit=40):
        for _ in range(limit):
            ActionChains(d).send_keys(Keys.TAB).perform()
            if predicate(self.focused(d)):
                return self.focused(d)
        self.fail("Tab never reached " + what)

    def test_keyboard_only_and_contrast_on_a_laptop_screen(self):
        job_id = self.submit(harness.container_job("a11y", TRAINER))
        harness.wait_for(lambda: self.job(job_id)["state"] == "JOB_STATE_RUNNING", 60, "the job to run")
        d = self.browser()
        d.set_window_size(1366, 768)
        d.get(self.daemon.url + "/")
        # Sign in: the token field has the focus; Enter submits.
        self.until(d, lambda d: self.focused(d).get_attribute("id") == "token", "the focused token field")
        self.focused(d).send_keys(self.daemon.token + Keys.ENTER)
        self.until(d, lambda d: d.find_elements(By.CSS_SELECTOR, "tr[data-job='%s']" % job_id), "the jobs list")
        low = d.execute_script(LOW_CONTRAST)
        self.assertEqual(low, [], "low contrast on the jobs page")
        # After a reload (signed in still), the first Tab reaches "Skip to
        # content", which moves the focus to the page.
        d.refresh()
        self.until(d, lambda d: d.find_elements(By.CSS_SELECTOR, "tr[data-job='%s']" % job_id), "the jobs list")
        ActionChains(d).send_keys(Keys.TAB).perform()
        self.assertEqual(self.focused(d).get_attribute("textContent"), "Skip to content",
                         self.focused(d).get_attribute("outerHTML"))
        self.assert_outlined(d)
        ActionChains(d).send_keys(Keys.ENTER).perform()
        self.assertEqual(self.focused(d).get_attribute("id"), "main")
        # Tab to the job's link and open it with Enter.
        link = self.tab_to(d, lambda e: e.get_attribute("href") and e.get_attribute("href").endswith("#/jobs/" + job_id),
                           "the job's link")
        self.assert_outlined(d)
        ActionChains(d).send_keys(Keys.ENTER).perform()
        self.until(d, lambda d: d.find_element(By.ID, "job-head").get_attribute("data-state") == "JOB_STATE_RUNNING",
                   "the job page")
        chart = self.until(d, lambda d: (lambda c: c if int(c.find_element(By.TAG_NAME, "svg")
                                                            .get_attribute("data-points")) >= 2 else None)(
            d.find_element(By.CSS_SELECTOR, "#metrics figure.chart-box")), "a metric chart with points")
        # A chart from the keyboard: Tab reaches it, + zooms, 0 resets.
        self.tab_to(d, lambda e: e.tag_name == "figure", "a chart")
        self.assert_outlined(d)
        ActionChains(d).send_keys("+").perform()
        self.until(d, lambda d: d.find_element(By.CSS_SELECTOR, "#metrics svg.chart")
                   .get_attribute("data-zoomed") == "1", "+ to zoom")
        d.find_element(By.CSS_SELECTOR, "#metrics figure.chart-box").send_keys("0")
        self.until(d, lambda d: d.find_element(By.CSS_SELECTOR, "#metrics svg.chart")
                   .get_attribute("data-zoomed") == "0", "0 to reset")
        low = d.execute_script(LOW_CONTRAST)
        self.assertEqual(low, [], "low contrast on the job page")
        self.shot(d, "job-laptop")
        # Usage and nodes pages, then the same pages in the dark scheme.
        for page in ("usage", "nodes"):
            d.get(self.daemon.url + "/#/" + page)
            self.until(d, lambda d: d.find_element(By.CSS_SELECTOR, "#usage-table tbody tr, #nodes section"),
                       "the %s page" % page)
            self.assertEqual(d.execute_script(LOW_CONTRAST), [], "low contrast on the %s page" % page)
        d.execute_cdp_cmd("Emulation.setEmulatedMedia",
                          {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        for page in ("jobs", "jobs/" + job_id, "usage"):
            d.get(self.daemon.url + "/#/" + page)
            self.until(d, lambda d: d.find_element(By.CSS_SELECTOR, "#jobs-body tr[data-job], #job-head[data-state], "
                                                   "#usage-table tbody tr"), "the %s page" % page)
            self.assertEqual(d.execute_script(LOW_CONTRAST), [], "low contrast on the dark %s page" % page)
        self.shot(d, "job-dark")


if __name__ == "__main__":
    unittest.main()
