"""The worker against a real API (SUNDIAL_URL, SUNDIAL_LEASE_TTL=1s; SUNDIAL_LONG_LEASE_URL, 5s)."""

import os
import signal
import subprocess
import sys
import threading
import time
import unittest
from typing import Any, Dict, List

import sundial
from sundial import JobContext, Worker

from support import (API_KEY, LONG_LEASE_URL, URL, Proxy, client, eventually, need_api, need_long_lease_api,
                     queue_name, running)

NO_BACKOFF = {"base_seconds": 0, "max_seconds": 0}


class WorkerTest(unittest.TestCase):
    def setUp(self) -> None:
        need_api(self)
        self.c = client()

    def worker(self, q: str, **options: Any) -> Worker:
        opts: Dict[str, Any] = {"url": URL, "api_key": API_KEY, "wait_seconds": 5, "shutdown_timeout": 5}
        opts.update(options)
        return Worker([q], **opts)

    def test_concurrency_4_runs_20_jobs(self) -> None:
        q = queue_name("conc")
        lock = threading.Lock()
        now = {"running": 0, "most": 0}

        def work(ctx: JobContext) -> int:
            with lock:
                now["running"] += 1
                now["most"] = max(now["most"], now["running"])
            time.sleep(0.25)
            with lock:
                now["running"] -= 1
            return ctx.payload["i"] * 2

        jobs = self.c.submit_many([{"queue": q, "type": "double", "payload": {"i": i}} for i in range(20)])
        w = self.worker(q, concurrency=4)
        w.handle("double", work)
        with running(w):
            done = [self.c.wait(j["id"], timeout=30) for j in jobs]
        self.assertEqual([(j["state"], j["attempt"], j["result"]) for j in done],
                         [("succeeded", 1, i * 2) for i in range(20)])
        self.assertEqual(now["most"], 4)

    def test_exception_retried_then_succeeds(self) -> None:
        q = queue_name("retry")

        def flaky(ctx: JobContext) -> str:
            if ctx.attempt == 1:
                raise RuntimeError("smtp timed out")
            return "sent"

        def broken(ctx: JobContext) -> None:
            raise sundial.NoRetry("bad address")

        job = self.c.submit("flaky", queue=q, backoff=NO_BACKOFF)
        bad = self.c.submit("broken", queue=q, max_attempts=5)
        w = self.worker(q)
        w.handle("flaky", flaky)
        w.handle("broken", broken)
        with running(w):
            done = self.c.wait(job["id"], timeout=30)
            dead = self.c.wait(bad["id"], timeout=30)
        self.assertEqual((done["state"], done["attempt"], done["result"]), ("succeeded", 2, "sent"))
        self.assertEqual((dead["state"], dead["attempt"], dead["last_error"]), ("dead", 1, "bad address"))

    def test_handler_outcomes_snooze_cancel_retry_after(self) -> None:
        q = queue_name("outcomes")
        hour = {"base_seconds": 3600, "max_seconds": 3600}

        def napper(ctx: JobContext) -> int:
            if ctx.attempt == 1:
                raise sundial.Snooze(0, "not yet")
            return ctx.attempt

        def canceller(ctx: JobContext) -> None:
            raise sundial.Cancel("order deleted")

        def limited(ctx: JobContext) -> str:
            if ctx.attempt == 1:
                raise sundial.RetryAfter(0.2, "429")
            return "ok"

        nap = self.c.submit("napper", queue=q, max_attempts=1)
        gone = self.c.submit("canceller", queue=q)
        slow = self.c.submit("limited", queue=q, backoff=hour)
        w = self.worker(q)
        w.handle("napper", napper)
        w.handle("canceller", canceller)
        w.handle("limited", limited)
        with running(w):
            a = self.c.wait(nap["id"], timeout=30)
            b = self.c.wait(gone["id"], timeout=30)
            c = self.c.wait(slow["id"], timeout=30)
        # Snoozed once with max_attempts 1: the attempt was given back.
        self.assertEqual((a["state"], a["attempt"], a["max_attempts"], a["result"]), ("succeeded", 2, 2, 2))
        self.assertEqual((b["state"], b["last_error"]), ("cancelled", "order deleted"))
        # Retried after 0.2 s, not after its hour of backoff.
        self.assertEqual((c["state"], c["attempt"], c["result"]), ("succeeded", 2, "ok"))

    def test_failure_message_reaches_the_job(self) -> None:
        q = queue_name("failmsg")
        job = self.c.submit("boom", queue=q, max_attempts=1)
        w = self.worker(q)
        w.handle("boom", lambda ctx: 1 / 0)
        with running(w):
            dead = self.c.wait(job["id"], timeout=30)
        self.assertEqual((dead["state"], dead["last_error"]), ("dead", "division by zero"))

    def test_progress_visible_on_the_job(self) -> None:
        q = queue_name("progress")
        release = threading.Event()

        def work(ctx: JobContext) -> str:
            ctx.progress(40, "copied 4 of 10 files")
            release.wait(20)
            return ctx.token

        job = self.c.submit("copy", queue=q)
        w = self.worker(q)
        w.handle("copy", work)
        with running(w):
            seen = eventually("progress on the job", lambda: self.c.get(job["id"]).get("progress") or {})
            self.assertEqual((seen["percent"], seen["message"]), (40, "copied 4 of 10 files"))
            self.assertEqual(self.c.get(job["id"])["state"], "active")
            release.set()
            done = self.c.wait(job["id"], timeout=20)
        self.assertEqual(done["state"], "succeeded")
        self.assertTrue(done["result"])  # the handler saw its fencing token

    def test_refused_heartbeat_signals_the_handler(self) -> None:
        q = queue_name("lost")
        signalled: Dict[str, float] = {}  # job id -> seconds until the signal

        def work(ctx: JobContext) -> str:
            t0 = time.monotonic()
            if ctx.cancelled.wait(20):
                signalled[ctx.id] = time.monotonic() - t0
            return "late"

        # cancelled while it runs: the next heartbeat answers 409
        job = self.c.submit("hold", queue=q)
        # past its timeout (1 s, + 0.2 s grace): Redis refuses the renewal
        slow = self.c.submit("hold", queue=q, timeout_seconds=1, max_attempts=1)
        w = self.worker(q, concurrency=2)
        w.handle("hold", work)
        with running(w):
            eventually("the job to start", lambda: self.c.get(job["id"])["state"] == "active")
            self.c.cancel(job["id"])
            eventually("the handler to be signalled", lambda: job["id"] in signalled, timeout=10)
            eventually("the slow job's handler to be signalled", lambda: slow["id"] in signalled, timeout=10)
        self.assertLess(signalled[slow["id"]], 5)
        # nothing was reported: the cancel stands, the late result is not stored
        got = self.c.get(job["id"])
        self.assertEqual(got["state"], "cancelled")
        self.assertNotIn("result", got)
        self.assertNotEqual(self.c.get(slow["id"]).get("result"), "late")

    def test_concurrency_8_drains_2000_jobs_each_once(self) -> None:
        q = queue_name("drain")
        n = 2000
        lock = threading.Lock()
        runs: Dict[str, int] = {}

        def work(ctx: JobContext) -> None:
            with lock:
                runs[ctx.id] = runs.get(ctx.id, 0) + 1

        ids: List[str] = []
        for start in range(0, n, 1000):
            ids += [j["id"] for j in self.c.submit_many(
                [{"queue": q, "type": "noop", "payload": {"i": i}} for i in range(start, start + 1000)])]
        w = self.worker(q, concurrency=8)
        w.handle("noop", work)
        began = time.monotonic()
        with running(w):
            eventually("all jobs to succeed", lambda: self.c.queue(q)["succeeded_total"] >= n, timeout=120, every=0.1)
            took = time.monotonic() - began
        stats = self.c.queue(q)
        self.assertEqual((stats["succeeded_total"], stats["failed_total"], stats["active"], stats["dead"]),
                         (n, 0, 0, 0))
        self.assertEqual(len(runs), n)
        self.assertEqual(sorted(runs), sorted(ids))
        self.assertEqual([k for k, v in runs.items() if v != 1], [])
        print(f"\n  drained {n} jobs at concurrency 8 in {took:.1f} s ({n / took:.0f} jobs/s)", file=sys.stderr)

    def test_stale_token_refused_and_the_handler_told(self) -> None:
        # The first worker's heartbeats never arrive (a proxy drops them): its
        # lease expires, the poller reclaims the job and a second worker runs
        # it under a new token. The first handler is told to stop, its
        # result is never reported, and its token is refused by the API.
        q = queue_name("fence")
        told = threading.Event()
        hold = threading.Event()
        self.addCleanup(hold.set)
        first: Dict[str, str] = {}

        def stale(ctx: JobContext) -> str:
            first["token"] = ctx.token
            if ctx.cancelled.wait(20):
                first["reason"] = ctx._attempt.lost_reason
                told.set()
            hold.wait(20)  # keep the slot busy: this worker claims nothing more
            return "stale result"

        proxy = Proxy(URL, lambda method, path: path.endswith("/heartbeat"))
        self.addCleanup(proxy.close)
        job = self.c.submit("fenced", queue=q, backoff=NO_BACKOFF, max_attempts=3)
        w1 = self.worker(q, url=proxy.url)
        w1.handle("fenced", stale)
        second: Dict[str, str] = {}

        def fresh(ctx: JobContext) -> str:
            second["token"] = ctx.token
            return "fresh result"

        w2 = self.worker(q)
        w2.handle("fenced", fresh)
        with running(w1):
            eventually("the first handler to be told", told.is_set, timeout=10)
            with running(w2):
                done = self.c.wait(job["id"], timeout=20)
            # the stale token is refused everywhere
            for route, body in (("heartbeat", {}), ("complete", {"result": "stale"}), ("release", {})):
                with self.assertRaises(sundial.Conflict, msg=route):
                    self.c.transport.request("POST", f"/v1/jobs/{job['id']}/{route}",
                                             dict(body, token=first["token"]), retries=0)
            hold.set()
        self.assertEqual((done["state"], done["attempt"], done["result"]), ("succeeded", 2, "fresh result"))
        self.assertNotEqual(first["token"], second["token"])
        self.assertIn("renewed in time", first["reason"])
        self.assertNotIn("complete", proxy.seen)  # the stale result was never sent
        self.assertEqual(self.c.get(job["id"])["result"], "fresh result")

    def test_complete_retried_after_a_broken_connection(self) -> None:
        # the connection breaks before the complete reaches the API, then
        # after the API wrote it (the repeat is answered 409): either way the
        # job ends succeeded with attempt 1, and no fail is sent
        for after_forwarding in (False, True):
            with self.subTest(after_forwarding=after_forwarding):
                q = queue_name("complete")
                dropped: List[str] = []

                def drop(method: str, path: str) -> bool:
                    if path.endswith("/complete") and not dropped:
                        dropped.append(path)
                        return True
                    return False

                proxy = Proxy(URL, drop, after_forwarding=after_forwarding)
                self.addCleanup(proxy.close)
                job = self.c.submit("pay", {"amount": 5}, queue=q, backoff=NO_BACKOFF)
                w = self.worker(q, url=proxy.url)
                w.handle("pay", lambda ctx: {"paid": ctx.payload["amount"]})
                with running(w):
                    done = self.c.wait(job["id"], timeout=30)
                    eventually("the repeated complete", lambda: proxy.seen.get("complete") == 2)
                self.assertEqual(proxy.dropped, [f"/v1/jobs/{job['id']}/complete"])
                self.assertEqual((done["state"], done["attempt"], done["result"]), ("succeeded", 1, {"paid": 5}))
                self.assertEqual(proxy.seen.get("complete"), 2)
                self.assertNotIn("fail", proxy.seen)


class ShutdownTest(unittest.TestCase):
    def setUp(self) -> None:
        need_api(self)
        self.c = client()

    def start_worker(self, q: str, shutdown_timeout: float, concurrency: int = 2) -> "subprocess.Popen[str]":
        env = dict(os.environ, SUNDIAL_QUEUES=q, SHUTDOWN_TIMEOUT=str(shutdown_timeout), CONCURRENCY=str(concurrency))
        proc = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "worker_proc.py")],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(proc.kill)
        return proc

    def test_sigterm_lets_a_running_job_finish(self) -> None:
        q = queue_name("term-ok")
        proc = self.start_worker(q, shutdown_timeout=10)
        job = self.c.submit("slow", {"seconds": 1.5}, queue=q)
        eventually("the job to start", lambda: self.c.get(job["id"])["state"] == "active")
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=15)
        took = time.monotonic() - sent
        self.assertEqual(proc.returncode, 0, out)
        self.assertLess(took, 10, out)
        done = self.c.get(job["id"])
        self.assertEqual((done["state"], done["attempt"]), ("succeeded", 1), out)
        self.assertIn("finished", out)

    def test_sigterm_exits_within_its_deadline(self) -> None:
        q = queue_name("term-late")
        proc = self.start_worker(q, shutdown_timeout=1)
        job = self.c.submit("slow", {"seconds": 60}, queue=q, max_attempts=1)
        eventually("the job to start", lambda: self.c.get(job["id"])["state"] == "active")
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=15)
        took = time.monotonic() - sent
        self.assertEqual(proc.returncode, 0, out)
        self.assertLess(took, 1 + 2.5, out)  # the deadline, and the process' own exit
        self.assertIn("giving it back", out)
        self.assertIn("lease given back", out)
        # nothing was reported; the lease was given back: queued again at
        # once, the interrupted attempt not counted (max_attempts 1, not dead)
        got = self.c.get(job["id"])
        self.assertEqual((got["state"], got["attempt"]), ("queued", 0), out)
        self.assertNotIn("result", got)

    def run_elsewhere(self, q: str, ids: List[str]) -> List[Dict[str, Any]]:
        """Runs the queue's slow jobs at once on a worker in this process and
        answers the jobs when all have ended."""
        w = Worker([q], url=URL, api_key=API_KEY, concurrency=8, wait_seconds=5, shutdown_timeout=5)
        w.handle("slow", lambda ctx: {"elsewhere": True})
        with running(w):
            return [self.c.wait(i, timeout=20) for i in ids]

    def test_sigterm_mid_batch_gives_back_the_rest(self) -> None:
        # 6 short jobs finish, 4 long ones are running and 2 more are queued
        # when SIGTERM comes; after the 1 s deadline the 4 are given back,
        # and another worker runs them (and the 2) at attempt 1.
        q = queue_name("term-batch")
        proc = self.start_worker(q, shutdown_timeout=1, concurrency=4)
        short = [j["id"] for j in self.c.submit_many(
            [{"queue": q, "type": "slow", "payload": {"seconds": 0.05}} for _ in range(6)])]
        long = [j["id"] for j in self.c.submit_many(
            [{"queue": q, "type": "slow", "payload": {"seconds": 60}, "max_attempts": 1} for _ in range(6)])]
        eventually("the short jobs to finish and 4 long ones to run", lambda: (
            all(self.c.get(i)["state"] == "succeeded" for i in short)
            and self.c.queue(q)["active"] == 4))
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=15)
        self.assertEqual(proc.returncode, 0, out)
        self.assertEqual(out.count("lease given back"), 4, out)
        after = [self.c.get(i) for i in long]
        self.assertEqual(sorted((j["state"], j["attempt"]) for j in after), [("queued", 0)] * 6, out)
        done = self.run_elsewhere(q, long)
        self.assertEqual([(j["state"], j["attempt"], j["result"]) for j in done],
                         [("succeeded", 1, {"elsewhere": True})] * 6, out)
        finished = [self.c.get(i) for i in short]
        self.assertEqual([(j["state"], j["attempt"], j["result"]) for j in finished],
                         [("succeeded", 1, {"slept": 0.05})] * 6, out)

    def test_kill_9_jobs_come_back_after_one_lease(self) -> None:
        q = queue_name("kill")
        proc = self.start_worker(q, shutdown_timeout=10, concurrency=2)
        ids = [j["id"] for j in self.c.submit_many(
            [{"queue": q, "type": "slow", "payload": {"seconds": 60}, "backoff": NO_BACKOFF} for _ in range(2)])]
        eventually("both jobs to run", lambda: self.c.queue(q)["active"] == 2)
        proc.kill()
        proc.communicate(timeout=5)
        killed = time.monotonic()
        # no heartbeat renews them now: after one lease (1 s) the poller
        # reclaims them, a counted attempt, and they run again
        eventually("the jobs to come back", lambda: self.c.queue(q)["active"] == 0, timeout=10)
        back = time.monotonic() - killed
        self.assertLess(back, 5)
        done = self.run_elsewhere(q, ids)
        self.assertEqual([(j["state"], j["attempt"], j["result"]) for j in done],
                         [("succeeded", 2, {"elsewhere": True})] * 2)


class ShutdownMarginTest(unittest.TestCase):
    """A lease goes back only once the handler signalled at the shutdown
    deadline returned, or after the lease margin (against the API with 5 s
    leases: a 1 s margin)."""

    CLEANUP = 0.3  # what the handler still does once signalled

    def setUp(self) -> None:
        need_long_lease_api(self)
        self.c = sundial.Client(LONG_LEASE_URL, api_key=API_KEY)

    def start(self, q: str, work: Any, started: threading.Event) -> "tuple[Worker, threading.Thread]":
        w = Worker([q], url=LONG_LEASE_URL, api_key=API_KEY, wait_seconds=5, shutdown_timeout=0.2)
        w.handle("unwind", work)
        t = threading.Thread(target=w.run, kwargs={"install_signal_handlers": False}, daemon=True)
        t.start()
        self.addCleanup(t.join, 10)
        self.addCleanup(w.stop)
        eventually("the job to start", started.is_set)
        return w, t

    def test_lease_given_back_once_the_signalled_handler_returned(self) -> None:
        q = queue_name("term-unwind")
        started = threading.Event()
        seen: Dict[str, Any] = {}

        def work(ctx: JobContext) -> str:
            seen["margin"] = ctx.lease_ttl / 5
            started.set()
            seen["signalled"] = ctx.cancelled.wait(30)
            time.sleep(self.CLEANUP)  # its cleanup, after the signal
            seen["state"] = self.c.get(ctx.id)["state"]  # just before returning
            return "unwound"

        job = self.c.submit("unwind", queue=q, max_attempts=1)
        w, t = self.start(q, work, started)
        self.assertGreater(seen["margin"], self.CLEANUP * 2, "the API's leases are too short for this test")
        with self.assertLogs("sundial.worker", "INFO") as logs:
            w.stop()
            t.join(10)
        self.assertFalse(t.is_alive())
        self.assertTrue(seen["signalled"])
        eventually("the handler to return", lambda: "state" in seen)
        # the lease was still held while the handler unwound...
        self.assertEqual(seen["state"], "active", logs.output)
        # ...and given back once it returned: queued, the attempt not counted
        got = self.c.get(job["id"])
        self.assertEqual((got["state"], got["attempt"]), ("queued", 0), logs.output)
        self.assertNotIn("result", got)
        self.assertTrue(any(f"job {job['id']}: lease given back" in line for line in logs.output), logs.output)
        self.assertFalse(any("still running" in line and "margin" in line for line in logs.output), logs.output)

    def test_lease_given_back_after_the_margin_when_the_handler_goes_on(self) -> None:
        q = queue_name("term-stuck")
        started, go = threading.Event(), threading.Event()
        self.addCleanup(go.set)
        seen: Dict[str, Any] = {}

        def work(ctx: JobContext) -> None:
            seen["margin"] = ctx.lease_ttl / 5
            started.set()
            ctx.cancelled.wait(30)
            seen["signalled"] = time.monotonic()
            go.wait(30)  # ignores the signal until the test lets it go
            seen["state"] = self.c.get(ctx.id)["state"]

        job = self.c.submit("unwind", queue=q, max_attempts=1)
        w, t = self.start(q, work, started)
        with self.assertLogs("sundial.worker", "INFO") as logs:
            w.stop()
            t.join(10)
            stopped = time.monotonic()
        self.assertFalse(t.is_alive())
        # given back after the margin, with a warning naming the job, while
        # the handler still runs
        self.assertGreaterEqual(stopped - seen["signalled"], seen["margin"] * 0.9, logs.output)
        self.assertTrue(any(f"job {job['id']}: its handler is still running" in line and "WARNING" in line
                            for line in logs.output), logs.output)
        got = self.c.get(job["id"])
        self.assertEqual((got["state"], got["attempt"]), ("queued", 0), logs.output)
        go.set()
        eventually("the handler to return", lambda: "state" in seen)
        self.assertEqual(seen["state"], "queued")


if __name__ == "__main__":
    unittest.main()
