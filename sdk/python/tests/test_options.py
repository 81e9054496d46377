"""The job options of issue 50 against a real API (SUNDIAL_URL): expiry,
deadlines, debounce, sequences and tags."""

import threading
import time
import unittest
import urllib.parse
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List

import sundial
from sundial import JobContext, Worker

from support import API_KEY, URL, ScriptedServer, client, eventually, need_api, queue_name, running

NO_BACKOFF = {"base_seconds": 0, "max_seconds": 0}


class OptionsTest(unittest.TestCase):
    def setUp(self) -> None:
        need_api(self)
        self.c = client()

    def worker(self, q: str, **options: Any) -> Worker:
        opts: Dict[str, Any] = {"url": URL, "api_key": API_KEY, "wait_seconds": 5, "shutdown_timeout": 5}
        opts.update(options)
        return Worker([q], **opts)

    def test_submit_options_are_on_the_job(self) -> None:
        q = queue_name("opts")
        start_by = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(hours=1)
        deadline = start_by + timedelta(hours=1)
        job = self.c.submit("noop", queue=q, start_by=start_by, deadline=deadline,
                            sequence={"key": "order-7", "on_failure": "cancel"}, tags=["tenant:acme", "vip"])
        got = self.c.get(job["id"])
        self.assertEqual(sundial.durable.parse_time(got["start_by"]), start_by.timestamp())
        self.assertEqual(sundial.durable.parse_time(got["deadline"]), deadline.timestamp())
        self.assertEqual(got["sequence"], {"key": "order-7", "on_failure": "cancel"})
        self.assertEqual(got["tags"], ["tenant:acme", "vip"])
        self.assertNotIn("debounced", got)
        # relative forms
        rel = self.c.submit("noop", queue=q, expires_in_seconds=60, deadline_in_seconds=120, sequence="k")
        self.assertAlmostEqual(sundial.durable.parse_time(rel["start_by"]), time.time() + 60, delta=10)
        self.assertAlmostEqual(sundial.durable.parse_time(rel["deadline"]), time.time() + 120, delta=10)
        self.assertEqual(rel["sequence"]["key"], "k")
        # both forms of one option, and a bad tag, are refused naming the field
        with self.assertRaises(sundial.InvalidArgument):
            self.c.submit("noop", queue=q, start_by=start_by, expires_in_seconds=5)
        with self.assertRaises(sundial.InvalidArgument) as cm:
            self.c.submit("noop", queue=q, tags=["no spaces"])
        self.assertIn("tags", cm.exception.field or "")

    def test_expired_job_ends_dead_and_never_runs(self) -> None:
        q = queue_name("expiry")
        self.c.pause(q)
        job = self.c.submit("late", queue=q, expires_in_seconds=0.5)
        dead = eventually("the job to expire", lambda: (j := self.c.get(job["id"]))["state"] == "dead" and j,
                          timeout=30, every=0.1)
        self.assertTrue(dead["last_error"].startswith("expired:"), dead["last_error"])
        # a worker on the resumed queue runs a later job, never the expired one
        self.c.resume(q)
        later = self.c.submit("late", queue=q)
        ran: List[str] = []
        w = self.worker(q)
        w.handle("late", lambda ctx: ran.append(ctx.id))
        with running(w):
            self.c.wait(later["id"], timeout=30)
        self.assertEqual(ran, [later["id"]])
        self.assertEqual(self.c.get(job["id"])["state"], "dead")

    def test_deadline_stops_retries(self) -> None:
        q = queue_name("deadline")
        job = self.c.submit("fails", queue=q, deadline_in_seconds=1, max_attempts=100,
                            backoff={"base_seconds": 0.3, "max_seconds": 0.3})
        w = self.worker(q)

        def fails(ctx: JobContext) -> None:
            raise RuntimeError("try again")

        w.handle("fails", fails)
        with running(w):
            done = self.c.wait(job["id"], timeout=30)
        self.assertEqual(done["state"], "dead")
        self.assertIn("deadline passed", done["last_error"])  # the spec says "deadline passed"; the engine keeps the error with it
        self.assertLess(done["attempt"], 100)

    def test_debounce_replace_keeps_one_job_with_the_last_payload(self) -> None:
        q = queue_name("debounce")
        db = {"key": "user-1", "window_seconds": 1}
        first = self.c.submit("index", {"n": 1}, queue=q, debounce=db)
        second = self.c.submit("index", {"n": 2}, queue=q, debounce=db)
        third = self.c.submit("index", {"n": 3}, queue=q, debounce=db)
        self.assertFalse(first.get("debounced", False))
        self.assertEqual((second["id"], second.get("debounced")), (first["id"], True))
        self.assertEqual((third["id"], third.get("debounced")), (first["id"], True))
        self.assertEqual(self.c.get(first["id"])["debounce_key"], "user-1")
        seen: List[Any] = []
        w = self.worker(q)
        w.handle("index", lambda ctx: seen.append(ctx.payload) or "ok")
        with running(w):
            done = self.c.wait(first["id"], timeout=30)
        self.assertEqual(done["state"], "succeeded")
        self.assertEqual(seen, [{"n": 3}])
        # debounce does not go with delay_seconds
        with self.assertRaises(sundial.InvalidArgument):
            self.c.submit("index", queue=q, debounce=db, delay_seconds=5)

    def test_sequence_runs_in_submit_order_one_at_a_time(self) -> None:
        q = queue_name("seq")
        jobs = [self.c.submit("step", {"i": i}, queue=q, sequence="acct-1") for i in range(4)]
        other = self.c.submit("step", {"i": 100}, queue=q, sequence="acct-2")
        waiting = self.c.get(jobs[1]["id"])
        self.assertEqual(waiting["state"], "waiting")
        self.assertEqual(waiting["held_back"]["reason"], "dependencies")
        self.assertIn(jobs[0]["id"], waiting["held_back"]["message"])
        lock = threading.Lock()
        order: List[int] = []
        now = {"running": 0, "most": 0}

        def step(ctx: JobContext) -> None:
            with lock:
                if ctx.payload["i"] < 100:
                    now["running"] += 1
                    now["most"] = max(now["most"], now["running"])
                    order.append(ctx.payload["i"])
            time.sleep(0.05)
            with lock:
                if ctx.payload["i"] < 100:
                    now["running"] -= 1

        w = self.worker(q, concurrency=4)
        w.handle("step", step)
        with running(w):
            done = [self.c.wait(j["id"], timeout=30) for j in jobs + [other]]
        self.assertEqual([j["state"] for j in done], ["succeeded"] * 5)
        self.assertEqual(order, [0, 1, 2, 3])
        self.assertEqual(now["most"], 1)

    def test_tags_filter_lists_dead_letters_and_bulk(self) -> None:
        q = queue_name("tags")
        self.c.pause(q)
        red = [self.c.submit("t", queue=q, tags=["red"]) for _ in range(3)]
        self.c.submit("t", queue=q, tags=["blue"])
        self.c.submit("t", queue=q)
        page = self.c.queue_jobs(q, state="queued", tag="red", limit=100)
        self.assertEqual(sorted(j["id"] for j in page["jobs"]), sorted(j["id"] for j in red))
        self.assertTrue(all("red" in j["tags"] for j in page["jobs"]))
        res = self.c.bulk(q, "cancel", filter={"state": "queued", "tag": "red"})
        self.assertEqual(res["count"], 3)
        self.assertEqual({self.c.get(j["id"])["state"] for j in red}, {"cancelled"})
        self.assertEqual(len(self.c.queue_jobs(q, state="queued", limit=100)["jobs"]), 2)
        # dead letters by tag
        bad = self.c.submit("boom", queue=q, max_attempts=1, tags=["bad"])
        self.c.submit("boom", queue=q, max_attempts=1)
        self.c.resume(q)
        w = self.worker(q)
        w.handle("boom", lambda ctx: 1 / 0)
        w.handle("t", lambda ctx: None)
        with running(w):
            eventually("two dead jobs", lambda: len(self.c.dead(q)["jobs"]) == 2, timeout=30)
        self.assertEqual([j["id"] for j in self.c.dead(q, tag="bad")["jobs"]], [bad["id"]])


class SearchParamsTest(unittest.TestCase):
    """The test stack has no history store: the search's parameters are
    checked against a scripted server."""

    def test_search_sends_tag_and_payload_fields(self) -> None:
        srv = ScriptedServer([(200, {}, {"jobs": [], "next_cursor": ""})])
        self.addCleanup(srv.close)
        sundial.Client(srv.url, max_retries=0).search(queue="mail", tag="tenant:acme",
                                                      payload={"order": 42, "region": "eu west", "vip": True})
        u = urllib.parse.urlsplit(srv.requests[0][1])
        self.assertEqual(u.path, "/v1/jobs")
        self.assertEqual(dict(urllib.parse.parse_qsl(u.query)),
                         {"queue": "mail", "tag": "tenant:acme", "payload.order": "42", "payload.region": "eu west",
                          "payload.vip": "true"})


if __name__ == "__main__":
    unittest.main()
