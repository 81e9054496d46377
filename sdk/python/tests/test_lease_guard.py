"""The lease guard: a handler is told to stop on time by the worker's own
monotonic clock, whatever its heartbeats do (docs/sdk-python.md)."""

import threading
import time
import unittest
from typing import Any, Dict, List, Optional
from unittest import mock

import sundial.worker
from sundial import JobContext, LeaseLost, Worker

from support import API_KEY, URL, Proxy, ScriptedServer, client, eventually, need_api, queue_name


class Clock:
    """The monotonic clock, plus an offset a test moves forward (a pause of
    the whole process: SIGSTOP, then SIGCONT)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset

    def pause(self, seconds: float) -> None:
        self.offset += seconds


class GuardAgainstTheAPITest(unittest.TestCase):
    def setUp(self) -> None:
        need_api(self)
        self.c = client()

    def test_cancelled_on_time_while_a_heartbeat_hangs(self) -> None:
        # The first heartbeat is answered 503, the second is held open: no
        # renewal is accepted after the claim. The handler must see cancelled
        # once the claim's lease can no longer be trusted (TTL 1 s less a
        # fifth), while that renewal still hangs, and nothing is reported.
        q = queue_name("guard")
        beats: List[float] = []
        hold = threading.Event()

        def answer(method: str, path: str) -> Optional[int]:
            if not path.endswith("/heartbeat"):
                return None
            beats.append(time.monotonic())
            if len(beats) > 1:
                hold.wait(30)
            return 503

        proxy = Proxy(URL, lambda method, path: False, answer=answer)
        self.addCleanup(proxy.close)
        self.addCleanup(hold.set)
        seen: Dict[str, Any] = {}

        def work(ctx: JobContext) -> str:
            started = time.monotonic()
            if ctx.cancelled.wait(10):
                seen["after"] = time.monotonic() - started
                seen["beats"] = len(beats)
                seen["held"] = not hold.is_set()
                seen["ttl"] = ctx.lease_ttl
            return "late"

        job = self.c.submit("guarded", queue=q, max_attempts=1)
        w = Worker([q], url=proxy.url, api_key=API_KEY, wait_seconds=5, shutdown_timeout=5)
        w.handle("guarded", work)
        t = threading.Thread(target=w.run, kwargs={"install_signal_handlers": False}, daemon=True)
        t.start()
        try:
            eventually("the handler to see cancelled", lambda: "after" in seen, timeout=15)
            eventually("the attempt to end", lambda: not w.running, timeout=5)
        finally:
            w.stop()
            hold.set()
            t.join(10)
        self.assertEqual(seen["beats"], 2, "the second heartbeat was still held open")
        self.assertTrue(seen["held"])
        self.assertLessEqual(seen["after"], seen["ttl"] + 0.2)
        self.assertNotIn("complete", proxy.seen)  # the late result was never sent
        self.assertNotEqual(self.c.get(job["id"]).get("result"), "late")


class CheckOnAskTest(unittest.TestCase):
    """No API: a scripted server that records what the worker sends, and a
    clock the handler moves past its lease, as a pause would. The guard's
    timer is a minute away (a 60 s lease), so only the check on asking can
    tell the handler."""

    JOB = {"queue": "q", "payload": None, "attempt": 1, "max_attempts": 3}
    LEASE = {"token": "t1", "ttl_seconds": 60}

    def setUp(self) -> None:
        self.srv = ScriptedServer([])
        self.addCleanup(self.srv.close)
        self.clock = Clock()
        patcher = mock.patch.object(sundial.worker, "_now", self.clock, create=True)
        patcher.start()
        self.addCleanup(patcher.stop)
        self.w = Worker(["q"], url=self.srv.url, wait_seconds=1, shutdown_timeout=1)

    def run_one(self, job_id: str) -> None:
        self.w._start(dict(self.JOB, id=job_id, type=job_id), dict(self.LEASE), self.clock())
        eventually("the attempt to end", lambda: not self.w.running, timeout=10)

    def test_a_handler_resumed_past_its_lease_sees_cancelled_at_once(self) -> None:
        seen: Dict[str, Any] = {}

        def work(ctx: JobContext) -> str:
            seen["before"] = (ctx.cancelled.is_set(), ctx.lease_lost)
            self.clock.pause(ctx.lease_ttl * 2)
            seen["after"] = (ctx.cancelled.is_set(), ctx.lease_lost)
            with self.assertRaises(LeaseLost):
                ctx.check()
            with self.assertRaises(LeaseLost):
                ctx.progress(50, "half")
            return "acted"

        self.w.handle("asks", work)
        self.run_one("asks")
        self.assertEqual(seen, {"before": (False, False), "after": (True, True)})
        self.assertEqual(self.srv.requests, [])  # no heartbeat, no outcome

    def test_no_outcome_sent_past_the_lease(self) -> None:
        def work(ctx: JobContext) -> str:
            self.clock.pause(ctx.lease_ttl * 2)  # resumed, returns without asking
            return "acted"

        self.w.handle("silent", work)
        self.run_one("silent")
        self.assertEqual(self.srv.requests, [])

    def test_waiting_on_cancelled_returns_at_once_past_the_lease(self) -> None:
        seen: Dict[str, Any] = {}

        def work(ctx: JobContext) -> None:
            self.clock.pause(ctx.lease_ttl * 2)
            began = time.monotonic()
            seen["set"] = ctx.cancelled.wait(5)
            seen["took"] = time.monotonic() - began

        self.w.handle("waits", work)
        self.run_one("waits")
        self.assertTrue(seen["set"])
        self.assertLess(seen["took"], 1)
        self.assertEqual(self.srv.requests, [])


if __name__ == "__main__":
    unittest.main()
