"""Usage and cost in the web console (docs/console.md, docs/cost.md) in a
real headless Chromium against a real stokerd: the usage page by user and
by month with the ledger's figures, budgets with this month's use and their
state, and a job's own usage card. Skips like test_console.py without
Chromium."""
import unittest

import harness

from test_console import ConsoleBase

try:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
except ImportError:  # ConsoleBase.setUp reports it
    pass


def dollars(text):
    return float(text.strip().lstrip("$"))


class ConsoleUsageTest(ConsoleBase):

    def test_usage_by_user_and_month_budgets_and_a_jobs_cost(self):
        ada, bob = self.add_user("ada", "user"), self.add_user("bob", "user")
        jobs = {}
        for name, token in (("ada", ada), ("bob", bob)):
            status, body = self.api("POST", self.project_path, harness.container_job(name + "-job", "sleep 1", machine="n1-standard-4"),
                                    token=token)
            self.assertEqual(status, 200, body)
            jobs[name] = body["name"].rsplit("/", 1)[1]
        for job_id in jobs.values():
            self.assertEqual(self.wait_state(job_id)["state"], "JOB_STATE_SUCCEEDED")
        for scope, body in (("user:ada", {"monthlyUsd": 0.000001}), ("user:bob", {"monthlyGpuHours": 100})):
            status, reply = self.api("PUT", "/v1/budgets/" + scope, body)
            self.assertEqual(status, 200, reply)
        status, usage = self.api("GET", "/v1/usage?groupBy=user")
        self.assertEqual(status, 200, usage)
        by_user = {g["key"]: g for g in usage["groups"]}

        d = self.browser()
        self.sign_in(d, self.daemon.token)
        self.until(d, lambda d: "admin" in self.text(d, "#who"), "the admin signed in")
        d.find_element(By.CSS_SELECTOR, "#nav a[data-page='usage']").click()
        rows = self.until(d, lambda d: (lambda r: r if {"ada", "bob"} <= set(r) else None)(
            {r.get_attribute("data-key"): r for r in d.find_elements(By.CSS_SELECTOR, "#usage-table tbody tr")}),
            "ada's and bob's usage")
        for user in ("ada", "bob"):
            for price in ("vertex", "compute-engine"):
                shown = dollars(rows[user].find_element(By.CSS_SELECTOR, "td[data-price='%s']" % price).text)
                self.assertAlmostEqual(shown, by_user[user]["usd"][price],
                                       delta=by_user[user]["usd"][price] * 0.01)
        total = d.find_element(By.CSS_SELECTOR, "#usage-table tfoot td[data-price='vertex']").text
        self.assertAlmostEqual(dollars(total), usage["total"]["usd"]["vertex"],
                               delta=usage["total"]["usd"]["vertex"] * 0.01)
        # Budgets: ada's is spent, bob's is not.
        budgets = self.until(d, lambda d: (lambda r: r if len(r) == 2 else None)(
            {r.get_attribute("data-scope"): r for r in d.find_elements(By.CSS_SELECTOR, "#budgets tbody tr")}),
            "the two budgets")
        self.assertEqual(budgets["user:ada"].find_elements(By.TAG_NAME, "td")[-1].text, "EXCEEDED")
        self.assertEqual(budgets["user:bob"].find_elements(By.TAG_NAME, "td")[-1].text, "ok")
        self.assertIn("GPU-h", budgets["user:bob"].text)
        self.shot(d, "usage")
        # By month: this month, both jobs.
        Select(d.find_element(By.ID, "usage-by")).select_by_value("month")
        month = usage["startTime"][:7]
        row = self.until(d, lambda d: d.find_element(By.CSS_SELECTOR, "#usage-table tbody tr[data-key='%s']" % month),
                         "this month's row")
        self.assertEqual(row.find_elements(By.TAG_NAME, "td")[1].text, "2")

        # A job's page: its own usage and cost.
        job = self.job(jobs["ada"])
        d.get(self.daemon.url + "/#/jobs/" + jobs["ada"])
        # (The page redraws its head every 2 s: each value is read in one go.)
        vertex = self.until(d, lambda d: d.find_element(By.CSS_SELECTOR, "#job-usage td[data-price='vertex']").text,
                            "the job's usage card")
        self.assertAlmostEqual(dollars(vertex), job["stoker"]["usage"]["usd"]["vertex"],
                               delta=job["stoker"]["usage"]["usd"]["vertex"] * 0.01)
        self.assertEqual(self.until(d, lambda d: d.find_element(
            By.CSS_SELECTOR, "#job-usage td[data-k='gpuHours']").text, "GPU-hours"), "0")


if __name__ == "__main__":
    unittest.main()
