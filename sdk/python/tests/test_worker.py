"""The worker against a real API (SUNDIAL_URL, SUNDIAL_LEASE_TTL=1s)."""

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

from support import API_KEY, URL, Proxy, client, eventually, need_api, queue_name, running

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

    def start_worker(self, q: str, shutdown_timeout: float) -> "subprocess.Popen[str]":
        env = dict(os.environ, SUNDIAL_QUEUES=q, SHUTDOWN_TIMEOUT=str(shutdown_timeout))
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
        # nothing was reported; the lease runs out and the poller ends the attempt
        done = self.c.wait(job["id"], timeout=20)
        self.assertEqual(done["state"], "dead", out)
        self.assertNotIn("result", done)


if __name__ == "__main__":
    unittest.main()
