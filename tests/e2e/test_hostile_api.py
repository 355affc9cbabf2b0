"""One user against another through the API (issue #28, the lows), end to
end with a real stokerd and the real CLI:

- an upload session is its starter's: another user's DELETE, chunk or
  status question is told the session does not exist, and the starter's
  upload then completes;
- a priority above the submitter's ceiling is stored lowered, with a warning
  event; an admin raises the ceiling with `stoker admin users
  set-max-priority`; a lowered priority does not preempt another user's job
  that the asked-for priority would have;
- the console's cookie holds a session id, never the token; sign-out and a
  revoked token end the session (tests/e2e/test_console.py drives the
  browser).
"""
import json
import signal
import urllib.error
import urllib.request

from harness import (DEFAULT_CONFIG, Daemon, StokerTestCase, container_job, stokerd_refuses,
                     wait_for)

JOBS = "/v1/projects/p/locations/l/customJobs"

CONFIG = DEFAULT_CONFIG + """
inventory: {cpus: 8, memory_gb: 16, gpus: [{type: NVIDIA_TESLA_T4, memory_gb: 16}]}
auth: {max_priority: {user: 50}}
preemption:
  enabled: true
  priority_margin: 100
  grace_seconds: 2
  min_run_seconds: 0
"""


class HostileApiTest(StokerTestCase):
    config = CONFIG

    def raw(self, method, path, headers=None, data=None):
        """A request with exactly `headers`: (status, headers, body bytes)."""
        req = urllib.request.Request(self.daemon.url + path, method=method, data=data,
                                     headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def events(self, job_id, token=None):
        status, body = self.api("GET", JOBS + "/" + job_id + "/events", token=token)
        self.assertEqual(status, 200, body)
        return [e["reason"] for e in body["events"]]

    # ---- upload sessions ----

    def test_another_users_session_is_not_theirs_to_cancel_write_or_ask(self):
        alice, bob = self.add_user("alice"), self.add_user("bob")
        self.stoker("storage", "mb", "gs://shared")
        status, _, body = self.raw(
            "POST", "/upload/storage/v1/b/shared/o?uploadType=resumable&name=model.bin",
            {"Authorization": "Bearer " + alice, "X-Upload-Content-Length": "10"}, b"")
        self.assertEqual(status, 200, body)
        session = json.loads(body)["sessionUri"]
        first = self.raw("PUT", session, {"Authorization": "Bearer " + alice,
                                          "Content-Range": "bytes 0-4/10"}, b"01234")
        self.assertEqual(first[0], 308, first[2])

        as_bob = {"Authorization": "Bearer " + bob}
        for method, headers, data in (
                ("DELETE", {}, None),
                ("PUT", {"Content-Range": "bytes 5-9/10"}, b"EVIL!"),
                ("PUT", {"Content-Range": "bytes */10"}, b"")):
            status, _, body = self.raw(method, session, dict(as_bob, **headers), data)
            self.assertEqual(status, 404, (method, headers, body))
            self.assertIn("does not exist", json.loads(body)["error"]["message"])

        # Alice's upload goes on where it was and completes with her bytes.
        status, _, body = self.raw("PUT", session, {"Authorization": "Bearer " + alice,
                                                    "Content-Range": "bytes 5-9/10"}, b"56789")
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["size"], "10")
        got = self.raw("GET", "/storage/v1/b/shared/o/model.bin?alt=media", as_bob)
        self.assertEqual(got[2], b"0123456789")

    # ---- priority ceilings ----

    def gpu_job(self, name, priority, seconds=600, labels=None):
        job = container_job(name, "echo started; sleep %d" % seconds)
        job["jobSpec"]["workerPoolSpecs"][0]["machineSpec"] = {
            "machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4",
            "acceleratorCount": 1}
        job["jobSpec"]["scheduling"] = {"priority": priority}
        if labels:
            job["labels"] = labels
        return job

    def submit_as(self, token, job):
        status, body = self.api("POST", JOBS, job, token=token)
        self.assertEqual(status, 200, body)
        return body["name"].rsplit("/", 1)[1], body

    def test_a_priority_above_the_ceiling_is_lowered_and_preempts_no_one(self):
        alice, bob = self.add_user("alice"), self.add_user("bob")
        # Bob's preemptible job holds the one GPU.
        low_id, _ = self.submit_as(bob, self.gpu_job("bob-low", 0,
                                                     labels={"stoker-preemptible": "true"}))
        self.wait_state(low_id, states=("JOB_STATE_RUNNING",))

        # Alice asks for 1000; the config lets users set 50.
        high_id, high = self.submit_as(alice, self.gpu_job("alice-high", 1000, seconds=1))
        self.assertEqual(high["jobSpec"]["scheduling"]["priority"], 50, high["jobSpec"])
        self.assertIn("warning: priority 1000 was lowered to 50, the highest user alice may set; "
                      "an admin can raise it with `stoker admin users set-max-priority alice N`",
                      self.events(high_id, alice))
        # The scheduler has weighed it (the queue gives its reason) and left
        # Bob's job alone: 50 is not 100 above 0.
        wait_for(lambda: any(j["jobId"] == high_id and j["reason"] for j in
                             self.api("GET", "/v1/stoker/queue")[1]["jobs"]),
                 30, "the lowered job's wait reason")
        self.assertEqual(self.job(low_id)["state"], "JOB_STATE_RUNNING")
        self.assertFalse(any("PREEMPTED" in e for e in self.events(low_id)))
        self.stoker("jobs", "cancel", high_id)

        # An admin lets Alice go higher: now 1000 stays, and preempts.
        r = self.stoker("admin", "users", "set-max-priority", "alice", "1000")
        self.assertIn("up to 1000", r.stdout)
        listing = self.stoker("admin", "users", "list").stdout
        self.assertRegex(listing, r"alice\s+user\s+-\s+1000 ")
        self.assertRegex(listing, r"bob\s+user\s+-\s+50 \(role\)")
        again_id, again = self.submit_as(alice, self.gpu_job("alice-again", 1000, seconds=1))
        self.assertEqual(again["jobSpec"]["scheduling"]["priority"], 1000)
        self.assertFalse(any("lowered" in e for e in self.events(again_id, alice)))
        wait_for(lambda: any(e.startswith("PREEMPTED by job " + again_id)
                             for e in self.events(low_id)), 30, "the preemption")
        self.stoker("jobs", "cancel", low_id)
        self.wait_state(low_id, timeout=60)

    def test_only_admins_set_ceilings_and_bad_ones_are_refused(self):
        alice = self.add_user("alice")
        r = self.stoker("admin", "users", "set-max-priority", "alice", "1000",
                        env={"STOKER_TOKEN": alice}, check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("only admins manage users", r.stderr)
        r = self.stoker("admin", "users", "set-max-priority", "alice", "5000", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("maxPriority: 5000 is not a priority", r.stderr)
        r = self.stoker("admin", "users", "set-max-priority", "alice", "high", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("'high' is not a priority", r.stderr)
        self.stoker("admin", "users", "set-max-priority", "alice", "-5")
        _, job = self.submit_as(alice, container_job("neg", "true"))
        self.assertEqual(job["jobSpec"]["scheduling"]["priority"], -5)
        r = self.stoker("admin", "users", "set-max-priority", "alice", "role")
        self.assertIn("up to 50 (its role's ceiling)", r.stdout)

    def test_a_bad_auth_section_stops_stokerd_naming_the_key(self):
        err = stokerd_refuses(self.tmp + "/bad", DEFAULT_CONFIG +
                              "auth: {max_priority: {user: 5000}}\n")
        self.assertIn("auth.max_priority.user: 5000 is not a priority", err)
        err = stokerd_refuses(self.tmp + "/bad2", DEFAULT_CONFIG + "auth: {sessions: 1}\n")
        self.assertIn("auth.sessions: unknown key", err)

    # ---- console sessions ----

    def sign_in(self, token):
        """Signs in as the console does: (cookie header, csrf, Set-Cookie)."""
        status, headers, body = self.raw(
            "POST", "/console/session", {"Content-Type": "application/json"},
            json.dumps({"token": token}).encode())
        self.assertEqual(status, 200, body)
        set_cookie = headers["Set-Cookie"]
        return set_cookie.split(";")[0], json.loads(body)["csrf"], set_cookie

    def test_the_cookie_is_a_session_that_sign_out_and_revocation_end(self):
        alice = self.add_user("alice")
        cookie, csrf, set_cookie = self.sign_in(alice)
        self.assertNotIn(alice, set_cookie)
        self.assertNotIn(alice[4:], set_cookie)
        self.assertRegex(cookie, r"^stoker_session=[0-9a-f]{64}$")
        self.assertIn("Max-Age=43200", set_cookie)  # 12 h by default
        self.assertEqual(self.raw("GET", JOBS, {"Cookie": cookie})[0], 200)

        # Sign-out ends that session: a copy of the cookie opens nothing.
        status, headers, _ = self.raw("POST", "/console/signout",
                                      {"Cookie": cookie, "X-Stoker-CSRF": csrf}, b"")
        self.assertEqual(status, 200)
        self.assertIn("Max-Age=0", headers["Set-Cookie"])
        self.assertEqual(self.raw("GET", JOBS, {"Cookie": cookie})[0], 401)
        self.assertEqual(self.raw("GET", "/console/session", {"Cookie": cookie})[0], 401)
        # Her token still works: signing out of the console revokes nothing.
        self.assertEqual(self.api("GET", JOBS, token=alice)[0], 200)

        # Revoking her token ends every console session of hers.
        first, _, _ = self.sign_in(alice)
        second, _, _ = self.sign_in(alice)
        token_id = self.api("GET", "/v1/whoami", token=alice)[1]["tokenId"]
        self.stoker("admin", "users", "revoke", token_id)
        for c in (first, second):
            self.assertEqual(self.raw("GET", JOBS, {"Cookie": c})[0], 401)

    def test_a_session_survives_a_restart_of_stokerd(self):
        alice = self.add_user("alice")
        cookie, _, _ = self.sign_in(alice)
        self.daemon.kill(signal.SIGTERM)
        self.daemon = Daemon(self.data, self.config).start()
        self.assertEqual(self.raw("GET", JOBS, {"Cookie": cookie})[0], 200)


class ShortSessionTest(StokerTestCase):
    config = DEFAULT_CONFIG + "auth: {console_session_hours: 0.0003}\n"  # about a second

    def test_an_expired_session_is_refused(self):
        status, body = self.api("POST", "/v1/admin/users", {"name": "ada", "role": "user"})
        self.assertEqual(status, 200, body)
        token = self.api("POST", "/v1/admin/users/ada/tokens", {})[1]["token"]
        req = urllib.request.Request(self.daemon.url + "/console/session", method="POST",
                                     data=json.dumps({"token": token}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            set_cookie = r.headers["Set-Cookie"]
        self.assertIn("Max-Age=1", set_cookie)
        cookie = set_cookie.split(";")[0]

        def status_with_cookie():
            req = urllib.request.Request(self.daemon.url + JOBS, headers={"Cookie": cookie})
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    return r.status
            except urllib.error.HTTPError as e:
                return e.code

        wait_for(lambda: status_with_cookie() == 401, 10, "the session to expire")


if __name__ == "__main__":
    import harness
    harness.main()
