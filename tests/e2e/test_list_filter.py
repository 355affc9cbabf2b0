"""jobs list --filter: gcloud's filter language in the CLI (applied to every job, as gcloud
does on the client), and the AIP-160 subset of ListCustomJobs in the REST API."""
import json
import urllib.parse

from harness import StokerTestCase, container_job


class ListFilterTest(StokerTestCase):

    def ids(self, *args, check=True):
        # Sorted by number: the order of a listing is tested on its own below.
        r = self.stoker("--format", "json", "jobs", "list", *args, check=check)
        return sorted((j["name"].rsplit("/", 1)[1] for j in json.loads(r.stdout)), key=int)

    def job_with(self, name, script, labels=None):
        job = container_job(name, script)
        if labels:
            job["labels"] = labels
        return self.submit(job)

    def test_filters_from_the_reference(self):
        ok1 = self.job_with("my_job_1", "true", {"team": "ml"})
        ok2 = self.job_with("my_job_2", "true", {"team": "infra"})
        bad = self.job_with("my_job_3", "exit 3", {"team": "ml", "tier": "gold"})
        other = self.job_with("other", "true")
        for j in (ok1, ok2, bad, other):
            self.wait_state(j)
        self.assertEqual(self.job(bad)["state"], "JOB_STATE_FAILED")

        self.assertEqual(
            self.ids("--filter", 'state="JOB_STATE_SUCCEEDED" AND display_name:"my_job_*"'),
            [ok1, ok2])
        self.assertEqual(self.ids("--filter", 'create_time>"2021-05-18T00:00:00Z"'),
                         [ok1, ok2, bad, other])
        self.assertEqual(self.ids("--filter", 'create_time<"2021-05-18T00:00:00Z"'), [])
        created = self.job(ok2)["createTime"]
        self.assertEqual(self.ids("--filter", 'create_time<="%s"' % created), [ok1, ok2])
        self.assertEqual(self.ids("--filter", "labels.team=ml"), [ok1, bad])
        self.assertEqual(self.ids("--filter", "labels.team:*"), [ok1, ok2, bad])
        self.assertEqual(self.ids("--filter", "NOT state=JOB_STATE_FAILED"), [ok1, ok2, other])
        self.assertEqual(self.ids("--filter", "display_name!=other AND labels.tier:*"), [bad])
        self.assertEqual(
            self.ids("--filter", '(labels.team=infra OR display_name="other") AND '
                                 'state=JOB_STATE_SUCCEEDED'),
            [ok2, other])
        self.assertEqual(
            self.ids("--filter", "NOT (labels.team=ml OR labels.team=infra)"), [other])

        # The table view shows the same jobs.
        table = self.stoker("jobs", "list", "--filter", "labels.team=ml").stdout
        self.assertIn("my_job_1", table)
        self.assertIn("my_job_3", table)
        self.assertNotIn("my_job_2", table)

        # gcloud's own operators: ~ (a regular expression, matched anywhere), : on words.
        self.assertEqual(self.ids("--filter", r"displayName~^my_job_[13]$"), [ok1, bad])
        self.assertEqual(self.ids("--filter", "displayName!~job"), [other])
        self.assertEqual(self.ids("--filter", "labels:tier"), [bad])  # a map has the key

        # Newest first, as gcloud lists; --limit keeps the newest; --sort-by with ~ descending.
        def listed(*args):
            r = self.stoker("jobs", "list", "--format", "value(name.basename())", *args)
            return r.stdout.split()
        self.assertEqual(listed(), [other, bad, ok2, ok1])
        self.assertEqual(listed("--limit", "2"), [other, bad])
        self.assertEqual(listed("--sort-by", "displayName"), [ok1, ok2, bad, other])
        self.assertEqual(listed("--sort-by", "~displayName", "--limit", "1"), [other])
        # Pages of one job each are fetched until the end.
        self.assertEqual(self.ids("--filter", "state=JOB_STATE_SUCCEEDED", "--page-size", "1"),
                         [ok1, ok2, other])
        path = self.project_path + "?pageSize=1&filter=labels.team%3Dml"
        status, page = self.api("GET", path)
        self.assertEqual(status, 200, page)
        self.assertEqual([j["displayName"] for j in page["customJobs"]], ["my_job_1"])
        status, page2 = self.api("GET", path + "&pageToken=" + page["nextPageToken"])
        self.assertEqual([j["displayName"] for j in page2["customJobs"]], ["my_job_3"])

    def test_a_bad_filter_is_refused_naming_filter(self):
        self.job_with("a", "true")
        for bad in ("(state=JOB_STATE_FAILED", "state=A AND labels.x=b OR labels.y=c",
                    "displayName~(", "state=", "AND"):
            r = self.stoker("jobs", "list", "--filter", bad, check=False)
            self.assertEqual(r.returncode, 2, (bad, r.stdout, r.stderr))
            self.assertIn("--filter: at ", r.stderr)
            self.assertEqual(r.stdout, "")
        for bad, want in (("colour=red", "unknown field 'colour'"),
                          ("state<JOB_STATE_FAILED", "state supports = and !="),
                          ("create_time>yesterday", "RFC 3339")):
            status, body = self.api("GET", self.project_path + "?filter=" + urllib.parse.quote(bad))
            self.assertEqual(status, 400, (bad, body))
            self.assertIn("filter: at ", body["error"]["message"])
            self.assertIn(want, body["error"]["message"])
        status, body = self.api("GET", self.project_path + "?filter=" + "(" * 40 + "state=x")
        self.assertEqual(status, 400, body)
        self.assertIn("nested more than 32 deep", body["error"]["message"])
        status, body = self.api("GET", self.project_path + "?filter=" + "x" * 5000)
        self.assertEqual(status, 400, body)
        self.assertIn("at most 4096", body["error"]["message"])
