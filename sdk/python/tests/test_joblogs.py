"""Per-job logs against a real API (SUNDIAL_URL): ``ctx.log`` in a handler,
sent while it runs and before its outcome, read back with ``Client.logs``."""

import threading
import unittest
from typing import Any, Dict, List

import sundial
from sundial import JobContext, Worker

from support import API_KEY, URL, Proxy, client, eventually, need_api, queue_name, running


class JobLogTest(unittest.TestCase):
    def setUp(self) -> None:
        need_api(self)
        self.c = client()

    def worker(self, q: str, **options: Any) -> Worker:
        opts: Dict[str, Any] = {"url": URL, "api_key": API_KEY, "wait_seconds": 5, "shutdown_timeout": 5}
        opts.update(options)
        return Worker([q], **opts)

    def test_handler_logs_reach_the_job_before_its_outcome(self) -> None:
        q = queue_name("logs")
        job = self.c.submit("chatty", queue=q)
        go_on = threading.Event()

        def chatty(ctx: JobContext) -> str:
            ctx.log.info("starting", order=42, ok=True)
            # sent while the handler runs (every 200 ms), not only at its end
            go_on.wait(20)
            ctx.log.debug("details")
            ctx.log.warning("slow", ms="350")
            ctx.log.error("last words")
            return "done"

        w = self.worker(q)
        w.handle("chatty", chatty)
        with running(w):
            first = eventually("the first line while the handler runs",
                               lambda: self.c.logs(job["id"]), timeout=20)
            self.assertEqual(self.c.get(job["id"])["state"], "active")
            go_on.set()
            done = self.c.wait(job["id"], timeout=30)
        self.assertEqual(first[0]["message"], "starting")
        # the last lines went before the outcome: they are there once it is
        lines = self.c.logs(job["id"])
        self.assertEqual(done["state"], "succeeded")
        self.assertEqual([(ln["level"], ln["message"]) for ln in lines],
                         [("info", "starting"), ("debug", "details"), ("warn", "slow"), ("error", "last words")])
        self.assertEqual(lines[0]["fields"], {"order": "42", "ok": "true"})
        self.assertEqual(lines[2]["fields"], {"ms": "350"})
        self.assertEqual([ln["attempt"] for ln in lines], [1, 1, 1, 1])
        self.assertEqual([ln["seq"] for ln in lines], sorted(ln["seq"] for ln in lines))
        self.assertEqual(self.c.get(job["id"])["logs"]["lines"], 4)
        # paged with after=
        page = self.c.logs_page(job["id"], after=lines[1]["seq"], limit=1)
        self.assertEqual([ln["message"] for ln in page["lines"]], ["slow"])
        self.assertEqual(page["next_after"], lines[2]["seq"])
        self.assertEqual(page["dropped"], 0)

    def test_many_lines_are_sent_in_batches_of_100(self) -> None:
        q = queue_name("logmany")
        job = self.c.submit("chatty", queue=q)
        w = self.worker(q)

        def chatty(ctx: JobContext) -> None:
            for i in range(250):
                ctx.log.info(f"line {i}")

        w.handle("chatty", chatty)
        with running(w):
            self.assertEqual(self.c.wait(job["id"], timeout=30)["state"], "succeeded")
        self.assertEqual([ln["message"] for ln in self.c.logs(job["id"])], [f"line {i}" for i in range(250)])

    def test_a_refused_log_call_drops_the_lines_and_the_job_goes_on(self) -> None:
        q = queue_name("log409")
        # every POST .../logs answers 409 (a stale attempt): the handler is not
        # bothered, the lines are dropped, the outcome still goes
        proxy = Proxy(URL, lambda method, path: False,
                      answer=lambda method, path: 409 if path.split("?")[0].endswith("/logs") else None)
        self.addCleanup(proxy.close)
        job = self.c.submit("chatty", queue=q)
        logs: List[sundial.JobLog] = []

        def chatty(ctx: JobContext) -> str:
            logs.append(ctx.log)
            ctx.log.info("one")
            eventually("the refused call", lambda: proxy.seen.get("logs"), timeout=10)
            ctx.log.info("two")  # dropped at once: the attempt's lines are refused
            return "ok"

        w = self.worker(q, url=proxy.url)
        w.handle("chatty", chatty)
        with running(w):
            done = self.c.wait(job["id"], timeout=30)
        self.assertEqual((done["state"], done["result"]), ("succeeded", "ok"))
        self.assertEqual(proxy.seen.get("logs"), 1)
        self.assertEqual(logs[0].dropped, 2)
        self.assertEqual(self.c.logs(job["id"]), [])


if __name__ == "__main__":
    unittest.main()
