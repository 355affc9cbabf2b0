"""gcloud's commands around a job that scripts use (issue #30): `stoker auth
print-access-token` gives the token the CLI sends, good for a curl of the
API; `stoker config list` / `config get-value` say which project, region and
server the CLI uses. Real stokerd, real CLI."""
import json
import urllib.error
import urllib.request

from harness import StokerTestCase, main


class GcloudSessionTest(StokerTestCase):

    def test_print_access_token_is_the_token_that_opens_the_api(self):
        token = self.stoker("auth", "print-access-token").stdout.strip()
        self.assertEqual(token, self.daemon.token)
        # As seed scripts do: curl -H "Authorization: Bearer $(gcloud auth print-access-token)".
        request = urllib.request.Request(self.daemon.url + self.project_path,
                                         headers={"Authorization": "Bearer " + token})
        with urllib.request.urlopen(request, timeout=10) as r:
            self.assertEqual(r.status, 200)
        # A wrong token is refused by the daemon: the printed one is not decoration.
        bad = urllib.request.Request(self.daemon.url + self.project_path,
                                     headers={"Authorization": "Bearer not-" + token})
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(bad, timeout=10)
        self.assertEqual(e.exception.code, 401)

    def test_config_says_which_project_region_and_server_the_cli_uses(self):
        # The harness runs the CLI with --server URL --project p --region l.
        self.assertEqual(self.stoker("config", "get-value", "project").stdout, "p\n")
        self.assertEqual(self.stoker("config", "get", "compute/region").stdout, "l\n")
        listed = self.stoker("config", "list").stdout
        self.assertIn("[core]\nproject = p\n", listed)
        self.assertIn("[stoker]\nserver = %s\n" % self.daemon.url, listed)
        # gcloud config list project --format "value(core.project)", as seed 004 asks.
        self.assertEqual(self.stoker("config", "list", "project",
                                     "--format", "value(core.project)").stdout, "p\n")
        as_json = json.loads(self.stoker("config", "list", "--format", "json").stdout)
        self.assertEqual(as_json["core"]["project"], "p")
        self.assertEqual(as_json["ai"]["region"], "l")
        bad = self.stoker("config", "get-value", "account", check=False)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("unknown property 'account'", bad.stderr)
        self.assertIn("core/project", bad.stderr)


    def test_get_config_names_the_account_trainers_run_as(self):
        # AI Platform's projects.getConfig, with what is true here: the test
        # daemon runs trainers as root (default_unix_user), on this host.
        import socket
        status, body = self.api("GET", "/v1/projects/p:getConfig")
        self.assertEqual(status, 200, body)
        self.assertEqual(body, {"serviceAccount": "root@" + socket.gethostname(),
                                "serviceAccountProject": "0",
                                "config": {"tpuServiceAccount": ""}})
        self.assertEqual(self.api("POST", "/v1/projects/p:getConfig", {})[0], 400)


if __name__ == "__main__":
    main()
