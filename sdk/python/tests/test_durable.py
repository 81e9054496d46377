"""Durable jobs against a real API (SUNDIAL_URL): steps recorded once per
job, sleeps and waits for signals that park the job, signals sent by the
client (docs/durable.md)."""

import threading
import time
import unittest
from typing import Any, Dict, List

import sundial
from sundial import JobContext, Worker

from support import API_KEY, URL, client, eventually, need_api, queue_name, running

NO_BACKOFF = {"base_seconds": 0, "max_seconds": 0}


class Counter:
    """Counts calls by name, from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: Dict[str, int] = {}

    def add(self, name: str) -> int:
        with self._lock:
            self.counts[name] = self.counts.get(name, 0) + 1
            return self.counts[name]

    def __getitem__(self, name: str) -> int:
        with self._lock:
            return self.counts.get(name, 0)


class DurableTest(unittest.TestCase):
    def setUp(self) -> None:
        need_api(self)
        self.c = client()

    def worker(self, q: str, **options: Any) -> Worker:
        opts: Dict[str, Any] = {"url": URL, "api_key": API_KEY, "wait_seconds": 5, "shutdown_timeout": 5,
                                "concurrency": 4}
        opts.update(options)
        return Worker([q], **opts)

    def awaiting(self, job_id: str, signal: str) -> Dict[str, Any]:
        """Waits until the job is parked waiting for the signal; returns it."""
        def parked() -> Any:
            j = self.c.get(job_id)
            awaiting = (j.get("durable") or {}).get("awaiting") or {}
            return j if j["state"] == "scheduled" and awaiting.get("signal") == signal else None
        return eventually(f"job {job_id} to wait for {signal!r}", parked)  # type: ignore[no-any-return]

    def steps(self, job: Dict[str, Any]) -> List[Any]:
        return [(s["seq"], s["name"], s["status"]) for s in (job.get("durable") or {}).get("steps") or []]

    def test_order_charge_wait_shipped_sleep_email(self) -> None:
        # The example. The first attempt fails after the charge step
        # (a crash); the retry gets the charge back without running it,
        # waits for "shipped" (parked: no thread, no lease), sleeps 1 s
        # (parked again), then sends the email.
        q = queue_name("order")
        ran = Counter()
        seen: Dict[str, Any] = {}

        def order(ctx: JobContext) -> Dict[str, Any]:
            charge = ctx.step("charge", lambda: {"id": f"ch_{ran.add('charge')}", "amount": ctx.payload["amount"]})
            if ctx.attempt == 1:
                raise RuntimeError("crash after the charge")
            shipped = ctx.wait_signal("shipped", timeout=60)
            ctx.sleep(1)
            seen.setdefault("woke", time.time())
            email = ctx.step("email", lambda: ran.add("email"))
            return {"charge": charge, "carrier": shipped["carrier"], "emails": email}

        job = self.c.submit("order", {"amount": 42}, queue=q, backoff=NO_BACKOFF)
        w = self.worker(q)
        w.handle("order", order)
        with running(w):
            parked = self.awaiting(job["id"], "shipped")
            self.assertEqual(self.steps(parked)[:1], [(1, "charge", "ok")])
            self.assertEqual(w.running, [])  # parked: no thread holds it
            sent = time.time()
            got = self.c.signal(job["id"], "shipped", {"carrier": "ups"}, idempotency_key="ship-1")
            self.assertEqual(got, {"status": "delivered", "job_id": job["id"]})
            done = self.c.wait(job["id"], timeout=30)
        self.assertEqual((done["state"], done["result"]),
                         ("succeeded", {"charge": {"id": "ch_1", "amount": 42}, "carrier": "ups", "emails": 1}))
        self.assertEqual((ran["charge"], ran["email"]), (1, 1))
        self.assertEqual(self.steps(done), [(1, "charge", "ok"), (2, "signal:shipped", "ok"), (3, "sleep", "ok"),
                                            (4, "email", "ok")])
        self.assertGreaterEqual(seen["woke"] - sent, 1.0)
        durable = done["durable"]
        self.assertEqual(durable["steps"][1]["result"], {"carrier": "ups"})
        self.assertEqual([(s["name"], s["value"]) for s in durable["signals"]], [("shipped", {"carrier": "ups"})])
        # Each park gave its attempt back (max_attempts grew by one): two
        # attempts counted, the crash and the last.
        self.assertEqual(done["attempt"] - (done["max_attempts"] - job["max_attempts"]), 2)

    def test_signal_sent_before_the_wait(self) -> None:
        # To the job's id before it ever ran, and to a key before any job
        # chose it (202 pending): both are kept and read at once.
        q = queue_name("early")

        def approve(ctx: JobContext) -> Any:
            ctx.step("prepare", lambda: True)
            return ctx.wait_signal("approved", key=(ctx.payload or {}).get("key"))

        by_id = self.c.submit("approve", queue=q)
        self.assertEqual(self.c.signal(by_id["id"], "approved", "yes")["status"], "delivered")
        pending = self.c.signal_key(q, "order-7", "approved", {"by": "key"})
        self.assertEqual(pending, {"status": "pending"})
        by_key = self.c.submit("approve", {"key": "order-7"}, queue=q)
        w = self.worker(q)
        w.handle("approve", approve)
        with running(w):
            a = self.c.wait(by_id["id"], timeout=30)
            b = self.c.wait(by_key["id"], timeout=30)
        self.assertEqual((a["state"], a["result"], a["attempt"]), ("succeeded", "yes", 1))
        self.assertEqual((b["state"], b["result"], b["attempt"]), ("succeeded", {"by": "key"}, 1))
        self.assertEqual(b["durable"]["signal_key"], "order-7")
        # Now the key names the job, which ended: it takes no more signals.
        with self.assertRaises(sundial.Conflict):
            self.c.signal_key(q, "order-7", "other")

    def test_duplicate_signal_is_delivered_once(self) -> None:
        q = queue_name("dup")
        runs = Counter()

        def approve(ctx: JobContext) -> Any:
            runs.add("attempts")
            return ctx.wait_signal("approved")

        job = self.c.submit("approve", queue=q)
        w = self.worker(q)
        w.handle("approve", approve)
        with running(w):
            self.awaiting(job["id"], "approved")
            first = self.c.signal(job["id"], "approved", {"by": "ada"}, idempotency_key="approval-1")
            again = self.c.signal(job["id"], "approved", {"by": "ada"}, idempotency_key="approval-1")
            with self.assertRaises(sundial.Conflict):
                self.c.signal(job["id"], "approved", {"by": "bob"})
            done = self.c.wait(job["id"], timeout=30)
        self.assertEqual((first["status"], again["status"]), ("delivered", "duplicate"))
        self.assertEqual((done["state"], done["result"]), ("succeeded", {"by": "ada"}))
        self.assertEqual(len(done["durable"]["signals"]), 1)
        self.assertEqual(runs["attempts"], 2)  # the wait, and the one after the signal
        with self.assertRaises(sundial.Conflict):  # an ended job takes no more signals
            self.c.signal(job["id"], "late")
        with self.assertRaises(sundial.NotFound):
            self.c.signal("no-such-job", "approved")

    def test_wait_times_out(self) -> None:
        q = queue_name("timeout")

        def approve(ctx: JobContext) -> str:
            try:
                ctx.wait_signal("approved", timeout=0.3)
            except sundial.SignalTimeout:
                return "timed out"
            return "approved"

        job = self.c.submit("approve", queue=q)
        w = self.worker(q)
        w.handle("approve", approve)
        with running(w):
            done = self.c.wait(job["id"], timeout=30)
        self.assertEqual((done["state"], done["result"]), ("succeeded", "timed out"))
        self.assertEqual(self.steps(done), [(1, "signal:approved", "timeout")])

    def test_changed_steps_fail_naming_the_step(self) -> None:
        q = queue_name("nondet")

        def versioned(ctx: JobContext) -> None:
            name = "charge" if ctx.attempt == 1 else "refund"  # the code changed under the job
            ctx.step(name, lambda: 1)
            if ctx.attempt == 1:
                raise RuntimeError("crash")

        job = self.c.submit("v", queue=q, max_attempts=2, backoff=NO_BACKOFF)
        w = self.worker(q)
        w.handle("v", versioned)
        with running(w):
            dead = self.c.wait(job["id"], timeout=30)
        self.assertEqual(dead["state"], "dead")
        self.assertIn('step 1 is "refund" in the handler but the job recorded "charge" there', dead["last_error"])

    def test_step_retries_and_recorded_errors(self) -> None:
        # A step's own retries run within the attempt; its final error is
        # recorded and raised again as StepError on the next attempt,
        # without running the step.
        q = queue_name("steperr")
        ran = Counter()

        def flaky() -> str:
            if ran.add("flaky") < 3:
                raise RuntimeError("try again")
            return "ok"

        def broken() -> None:
            ran.add("broken")
            raise sundial.NoRetry("card declined")

        def pay(ctx: JobContext) -> str:
            got = ctx.step("flaky", flaky, retries=2, backoff=0.01)
            try:
                ctx.step("charge", broken, retries=5)
            except sundial.StepError as exc:
                if ctx.attempt == 1:
                    raise RuntimeError("crash") from exc
                return f"{got}: {exc.message}"
            return "charged"

        job = self.c.submit("pay", queue=q, backoff=NO_BACKOFF)
        w = self.worker(q)
        w.handle("pay", pay)
        with running(w):
            done = self.c.wait(job["id"], timeout=30)
        self.assertEqual((done["state"], done["result"], done["attempt"]), ("succeeded", "ok: card declined", 2))
        self.assertEqual((ran["flaky"], ran["broken"]), (3, 1))
        self.assertEqual(self.steps(done), [(1, "flaky", "ok"), (2, "charge", "err")])

    def test_a_swallowed_park_still_parks(self) -> None:
        q = queue_name("swallow")
        ran = Counter()

        def careless(ctx: JobContext) -> str:
            try:
                ctx.sleep(0.3)
            except BaseException:  # noqa: B036 - the pitfall under test
                ran.add("swallowed")
                return "too early"
            return "slept"

        job = self.c.submit("careless", queue=q)
        w = self.worker(q)
        w.handle("careless", careless)
        with self.assertLogs("sundial.worker", "WARNING") as logs, running(w):
            done = self.c.wait(job["id"], timeout=30)
        self.assertEqual((done["state"], done["result"], ran["swallowed"]), ("succeeded", "slept", 1))
        self.assertTrue(any("caught sundial.Parked" in line for line in logs.output), logs.output)


if __name__ == "__main__":
    unittest.main()
