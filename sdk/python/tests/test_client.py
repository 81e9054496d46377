"""The client against a real API (SUNDIAL_URL) and against scripted local
servers (retries)."""

import time
import unittest

import sundial
from sundial import Client, Worker

from support import API_KEY, URL, ScriptedServer, client, eventually, need_api, queue_name, running


class ClientTest(unittest.TestCase):
    def setUp(self) -> None:
        need_api(self)
        self.c = client()

    def test_submit_get_wait(self) -> None:
        q = queue_name("wait")
        job = self.c.submit("greet", {"name": "Ada"}, queue=q, max_attempts=2)
        self.assertEqual(job["state"], "queued")
        self.assertEqual(job["queue"], q)
        self.assertEqual(job["max_attempts"], 2)
        self.assertEqual(self.c.get(job["id"])["payload"], {"name": "Ada"})

        w = Worker([q], url=URL, api_key=API_KEY, wait_seconds=5)
        w.handle("greet", lambda ctx: f"hello {ctx.payload['name']}")
        with running(w):
            done = self.c.wait(job["id"], timeout=20)
        self.assertEqual(done["state"], "succeeded")
        self.assertEqual(done["result"], "hello Ada")
        self.assertEqual(done["attempt"], 1)

    def test_wait_times_out(self) -> None:
        job = self.c.submit("nobody.runs.this", queue=queue_name("timeout"))
        start = time.monotonic()
        with self.assertRaises(sundial.WaitTimeout) as cm:
            self.c.wait(job["id"], timeout=0.3)
        self.assertIsInstance(cm.exception, TimeoutError)
        self.assertEqual((cm.exception.job or {}).get("state"), "queued")
        self.assertLess(time.monotonic() - start, 5)

    def test_batch(self) -> None:
        q = queue_name("batch")
        jobs = self.c.submit_many([
            {"queue": q, "type": "step", "payload": {"n": 0}},
            {"queue": q, "type": "step", "payload": {"n": 1}, "depends_on": ["#0"]},
            {"queue": q, "type": "step", "payload": {"n": 2}, "depends_on": ["#1"]},
        ])
        self.assertEqual([j["payload"]["n"] for j in jobs], [0, 1, 2])
        self.assertEqual([j["state"] for j in jobs], ["queued", "waiting", "waiting"])
        self.assertEqual(jobs[1]["depends_on"], [jobs[0]["id"]])
        # all or nothing: a bad job refuses the whole batch, naming it
        with self.assertRaises(sundial.InvalidArgument) as cm:
            self.c.submit_many([{"queue": q, "type": "ok"}, {"queue": q, "type": "ok", "priority": "urgent"}])
        self.assertEqual(cm.exception.field, "jobs[1].priority")
        self.assertEqual(self.c.queue(q)["submitted_total"], 3)

    def test_workflow(self) -> None:
        q1, q2 = queue_name("wf1"), queue_name("wf2")
        steps = [
            {"name": "report", "job": {"queue": q2, "type": "step"}, "after": ["extract"]},
            {"name": "extract", "job": {"queue": q1, "type": "step"}},
        ]
        wf = self.c.submit_workflow(steps, id=q1 + "-run")
        self.assertEqual(wf["id"], q1 + "-run")
        self.assertEqual(wf["steps"]["extract"]["state"], "queued")
        self.assertEqual(wf["steps"]["report"]["depends_on"], [wf["steps"]["extract"]["id"]])
        again = self.c.submit_workflow(steps, id=q1 + "-run")
        self.assertEqual(again["steps"]["report"]["id"], wf["steps"]["report"]["id"])
        with self.assertRaises(sundial.InvalidArgument) as cm:
            self.c.submit_workflow([{"name": "a", "job": {"queue": q1, "type": "step"}, "after": ["b"]}])
        self.assertEqual(cm.exception.field, "steps[0].after[0]")
        self.assertEqual(self.c.queue(q1)["submitted_total"], 1)

    def test_batch(self) -> None:
        q1, q2, qc = queue_name("b1"), queue_name("b2"), queue_name("bcb")
        out = self.c.create_batch([{"queue": q1, "type": "row"}, {"queue": q2, "type": "row"}],
                                  on_complete={"queue": qc, "type": "report", "payload": {"to": "ops"}})
        bid = out["batch"]["id"]
        self.assertEqual(out["batch"]["total"], 2)
        self.assertTrue(out["batch"]["sealed"])
        self.assertEqual([j["id"] for j in self.c.batch_jobs(bid)["jobs"]], out["job_ids"])
        self.assertEqual(self.c.cancel_batch(bid), 2)
        self.assertEqual([r["state"] for r in self.c.batch_results(bid)], ["cancelled", "cancelled"])
        done = eventually("on_complete fired", lambda: self.c.batch(bid)["on_complete"].get("job_id"))
        cb = self.c.get(done)
        self.assertEqual(cb["batch"], bid)
        self.assertEqual(cb["payload"], {"batch": bid, "to": "ops"})
        self.assertEqual(self.c.retry_batch(bid), 2)
        with self.assertRaises(sundial.InvalidArgument) as cm:
            self.c.create_batch([{"type": "row", "depends_on": [out["job_ids"][0]]}])
        self.assertEqual(cm.exception.field, "jobs[0].depends_on")
        with self.assertRaises(sundial.NotFound):
            self.c.batch("no-such-batch")

    def test_idempotency_key_repeat(self) -> None:
        q = queue_name("idem")
        first = self.c.submit("charge", {"order": 7}, queue=q, idempotency_key="order-7")
        again = self.c.submit("charge", {"order": 7}, queue=q, idempotency_key="order-7")
        self.assertEqual(first["id"], again["id"])
        self.assertEqual(again["idempotency_key"], "order-7")
        self.assertEqual(self.c.queue(q)["submitted_total"], 1)

    def test_typed_errors(self) -> None:
        q = queue_name("errors")
        with self.assertRaises(sundial.InvalidArgument) as cm:
            self.c.submit("x", queue=q, priority="urgent")
        e = cm.exception
        self.assertEqual((e.status, e.code, e.field), (400, "invalid_argument", "priority"))
        self.assertIn("priority", e.message)
        self.assertTrue(e.request_id and e.request_id.startswith("sdk-py-"), e.request_id)
        self.assertIsInstance(e, sundial.ApiError)

        with self.assertRaises(sundial.NotFound) as nf:
            self.c.get("01JUNKJUNKJUNKJUNKJUNKJUNK")
        self.assertEqual((nf.exception.status, nf.exception.code), (404, "not_found"))
        self.assertTrue(nf.exception.request_id)

        job = self.c.submit("x", queue=q, delay_seconds=3600)
        self.assertEqual(self.c.cancel(job["id"])["state"], "cancelled")
        with self.assertRaises(sundial.Conflict) as cf:
            self.c.cancel(job["id"])
        self.assertEqual((cf.exception.status, cf.exception.code), (409, "conflict"))
        self.assertIn("cancelled", cf.exception.message)

        if API_KEY:
            with self.assertRaises(sundial.Unauthenticated) as ua:
                Client(URL, api_key="wrong-key").queues()
            self.assertEqual(ua.exception.status, 401)

        # no history store in the test stack: the search is unavailable
        with self.assertRaises(sundial.Unavailable) as un:
            client(max_retries=0).search(queue=q)
        self.assertEqual((un.exception.status, un.exception.code), (503, "unavailable"))
        with self.assertRaises(sundial.Unavailable):
            client(max_retries=0).events(job["id"])

    def test_cancel_and_retry(self) -> None:
        q = queue_name("cancel")
        job = self.c.submit("later", queue=q, delay_seconds=3600)
        self.assertEqual(job["state"], "scheduled")
        self.assertEqual(self.c.cancel(job["id"])["state"], "cancelled")
        again = self.c.retry(job["id"])
        self.assertEqual((again["state"], again["attempt"]), ("queued", 0))

    def test_queues(self) -> None:
        q = queue_name("queues")
        paused = self.c.pause(q)  # creates the queue
        self.assertEqual((paused["name"], paused["paused"]), (q, True))
        self.assertIn(q, [x["name"] for x in self.c.queues()])
        self.assertFalse(self.c.resume(q)["paused"])
        self.assertFalse(self.c.queue(q)["paused"])
        with self.assertRaises(sundial.NotFound):
            self.c.resume(queue_name("unknown"))
        self.assertEqual(self.c.dead(q)["jobs"], [])
        self.assertEqual(self.c.retry_dead(q), 0)
        self.assertEqual(self.c.purge_dead(q), 0)

    def test_live_jobs_and_bulk(self) -> None:
        q = queue_name("bulk")
        for t in ("a", "b", "b"):
            self.c.submit(t, queue=q)
        page = self.c.queue_jobs(q, limit=2)
        self.assertEqual(len(page["jobs"]), 2)
        rest = self.c.queue_jobs(q, limit=2, cursor=page["next_cursor"])
        self.assertEqual((len(rest["jobs"]), rest["next_cursor"]), (1, ""))
        self.assertEqual([j["type"] for j in self.c.queue_jobs(q, type="b")["jobs"]], ["b", "b"])
        self.assertEqual(self.c.queue_jobs(q, state="dead")["jobs"], [])
        res = self.c.bulk(q, "cancel", filter={"state": "queued", "type": "b"})
        self.assertEqual((res["matched"], res["count"], res["done"]), (2, 2, True))
        with self.assertRaises(sundial.InvalidArgument) as e:
            self.c.bulk(q, "retry")
        self.assertEqual(e.exception.field, "ids")

    def test_schedules(self) -> None:
        q = queue_name("sched")
        sid = "py-" + q
        made = self.c.put_schedule(sid, {"cron": "0 3 * * *", "timezone": "Europe/Berlin",
                                         "job": {"queue": q, "type": "report", "payload": {"full": True}}})
        self.assertEqual((made["id"], made["cron"], made["enabled"]), (sid, "0 3 * * *", True))
        self.assertEqual(len(made["upcoming"]), 5)
        self.assertEqual(self.c.get_schedule(sid)["timezone"], "Europe/Berlin")
        self.assertIn(sid, [s["id"] for s in self.c.schedules(queue=q)])
        patched = self.c.patch_schedule(sid, {"enabled": False})
        self.assertFalse(patched["enabled"])
        self.assertIsNone(patched["next_run_at"])
        fired = self.c.trigger_schedule(sid)
        self.assertEqual((fired["queue"], fired["type"], fired["payload"]), (q, "report", {"full": True}))
        self.assertEqual(len(self.c.preview_schedule(every_seconds=60)), 5)
        self.c.delete_schedule(sid)
        with self.assertRaises(sundial.NotFound):
            self.c.get_schedule(sid)
        with self.assertRaises(sundial.InvalidArgument) as cm:
            self.c.put_schedule(sid, {"cron": "61 * * * *", "job": {"queue": q, "type": "report"}})
        self.assertEqual(cm.exception.field, "cron")

    def test_limits(self) -> None:
        q = queue_name("limits")
        lim = self.c.set_limit(q, "smtp", {"types": ["email.send"], "concurrency": 5,
                                           "rate": {"limit": 100, "period_seconds": 60}})
        self.assertEqual((lim["name"], lim["concurrency"], lim["active"]), ("smtp", 5, 0))
        self.assertEqual(self.c.get_limit(q, "smtp")["rate"], {"limit": 100, "period_seconds": 60})
        self.assertEqual([x["name"] for x in self.c.limits(q)], ["smtp"])
        self.c.delete_limit(q, "smtp")
        self.assertEqual(self.c.limits(q), [])
        with self.assertRaises(sundial.NotFound):
            self.c.get_limit(q, "smtp")
        with self.assertRaises(sundial.InvalidArgument):
            self.c.set_limit(q, "none", {"types": ["x"]})

    def test_workers_lists_http_workers(self) -> None:
        q = queue_name("registry")
        w = Worker([q], url=URL, api_key=API_KEY, worker_id="py-registry-" + q[-8:], wait_seconds=1)
        w.handle("noop", lambda ctx: None)
        with running(w):
            eventually("the worker in GET /v1/workers",
                       lambda: w.worker_id in [x["id"] for x in self.c.workers()])


class RetryTest(unittest.TestCase):
    """Retries against a scripted local server: no API needed."""

    JOB = {"id": "01JOB", "queue": "default", "type": "x", "state": "queued"}

    def test_503_then_200_honours_retry_after(self) -> None:
        srv = ScriptedServer([(503, {"Retry-After": "1"}, {"error": {"code": "unavailable", "message": "redis"}}),
                              (200, {}, self.JOB)])
        self.addCleanup(srv.close)
        start = time.monotonic()
        job = Client(srv.url, backoff=0.01).get("01JOB")
        took = time.monotonic() - start
        self.assertEqual(job["id"], "01JOB")
        self.assertEqual(len(srv.requests), 2)
        gap = srv.requests[1][2] - srv.requests[0][2]
        self.assertGreaterEqual(gap, 0.95, "the retry came before Retry-After")
        self.assertLess(took, 5)

    def test_429_retried_then_raised_with_fields(self) -> None:
        limited = (429, {"Retry-After": "0", "X-Request-Id": "rid-1"},
                   {"error": {"code": "rate_limited", "message": "slow down"}})
        srv = ScriptedServer([limited] * 3)
        self.addCleanup(srv.close)
        with self.assertRaises(sundial.RateLimited) as cm:
            Client(srv.url, max_retries=2, backoff=0.01).submit("x")
        self.assertEqual(len(srv.requests), 3)  # POST too: a 429 changed nothing
        self.assertEqual((cm.exception.status, cm.exception.request_id, cm.exception.retry_after),
                         (429, "rid-1", 0.0))

    def test_broken_connection_retried_only_when_safe(self) -> None:
        srv = ScriptedServer([(0, {}, None), (200, {}, self.JOB)])
        self.addCleanup(srv.close)
        self.assertEqual(Client(srv.url, backoff=0.01).get("01JOB")["id"], "01JOB")
        self.assertEqual(len(srv.requests), 2)

        # a submit without an idempotency key may have been written: not repeated
        srv2 = ScriptedServer([(0, {}, None), (201, {}, self.JOB)])
        self.addCleanup(srv2.close)
        with self.assertRaises(sundial.TransportError):
            Client(srv2.url, backoff=0.01).submit("x")
        self.assertEqual(len(srv2.requests), 1)

        # with one it is safe to repeat
        srv3 = ScriptedServer([(0, {}, None), (201, {}, self.JOB)])
        self.addCleanup(srv3.close)
        self.assertEqual(Client(srv3.url, backoff=0.01).submit("x", idempotency_key="k")["id"], "01JOB")
        self.assertEqual(len(srv3.requests), 2)

    def test_bearer_key_and_request_id_sent(self) -> None:
        srv = ScriptedServer([(200, {}, {"queues": []})])
        self.addCleanup(srv.close)
        self.assertEqual(Client(srv.url, api_key="k-123").queues(), [])
        self.assertEqual(srv.headers[0].get("Authorization"), "Bearer k-123")
        self.assertTrue(srv.headers[0].get("X-Request-Id", "").startswith("sdk-py-"))

if __name__ == "__main__":
    unittest.main()
