"""The worker: runs handlers for job types over the HTTP worker protocol
(docs/workers.md) with long-poll claims, leases renewed every third of
their TTL, progress, fencing tokens, and a graceful shutdown."""

import json
import logging
import os
import re
import signal
import socket
import threading
import time
from types import FrameType
from datetime import datetime
from typing import Any, Callable, Dict, List, Optional, Sequence, TypeVar, Union

from ._transport import ConnectionSlot, Transport
from .client import DEFAULT_URL, JSON
from .durable import Durable, wake_time
from .joblog import JobLog
from .encryption import ERROR, PAYLOAD, RESULT, EncryptionError, Keyring, MissingKey, is_encrypted, key_id
from .errors import (ApiError, Cancel, Conflict, InvalidArgument, LeaseLost, NoRetry, Parked, RetryAfter, Snooze,
                     SundialError, TransportError)

log = logging.getLogger("sundial.worker")

MAX_ERROR_BYTES = 64 << 10

_now = time.monotonic
"""The clock of every lease bound: monotonic, so that a step of the wall
clock moves none (tests replace it to stand for a pause of the process)."""

LOST_IN_TIME = "the lease could not be renewed in time"

Handler = Callable[["JobContext"], Any]
"""A handler takes the job's context and returns its result (any JSON value)."""

T = TypeVar("T")


class JobContext:
    """What a handler gets: the job and its lease.

    Attributes:
        id, type, queue, payload, attempt, max_attempts: the job's.
        job: the whole job as claimed (a dict of the API's fields).
        token: the lease's fencing token; pass it to systems the handler
            writes to, so that they can refuse a stale attempt.
        cancelled: set when the job must stop: its lease was lost (a
            heartbeat answered 409: reclaimed, cancelled, finished, or past
            its timeout), could not be renewed in time, or the worker's
            shutdown deadline passed. Nothing is reported for it then. A
            timer sets it when the lease can no longer be trusted, whatever
            the heartbeats do; ``is_set()`` and ``wait()`` also compare the
            clock with that bound first, so a handler resumed after a pause
            sees it before it can act.
        log: the job's logger (:class:`sundial.joblog.JobLog`):
            ``ctx.log.info("charged", amount=42)``; the lines are kept with
            the job, sent every 200 ms and before the attempt's outcome.
    """

    def __init__(self, job: JSON, token: str, ttl: float, attempt: "_Attempt") -> None:
        self.job = job
        self.id: str = job["id"]
        self.type: str = job["type"]
        self.queue: str = job.get("queue", "")
        self.payload: Any = job.get("payload")
        self.attempt: int = int(job.get("attempt", 0))
        self.max_attempts: int = int(job.get("max_attempts", 0))
        self.token = token
        self.lease_ttl = ttl
        self.cancelled: threading.Event = _LeaseEvent(attempt.expired)
        self._attempt = attempt
        self._durable = Durable(attempt)
        self.log = JobLog(attempt.worker, attempt)

    @property
    def lease_lost(self) -> bool:
        """True once the job must stop (the same as ``cancelled.is_set()``)."""
        return self.cancelled.is_set()

    def progress(self, percent: int, message: str = "") -> None:
        """Reports progress (0..100 and a short message): shown on the job
        and as a progress event; it also renews the lease. Raises
        :class:`LeaseLost` when the lease is gone; a failed report that does
        not say so is logged and otherwise ignored."""
        if not 0 <= percent <= 100:
            raise ValueError("percent must be 0..100")
        if self.cancelled.is_set():
            raise LeaseLost(self._attempt.lost_reason or "lease lost")
        if not self._attempt.worker._renew(self._attempt, int(percent), message):
            raise LeaseLost(self._attempt.lost_reason or "lease lost")

    def check(self) -> None:
        """Raises :class:`LeaseLost` when the job must stop: call it between
        steps of a long handler."""
        if self.cancelled.is_set():
            raise LeaseLost(self._attempt.lost_reason or "lease lost")

    # Durable execution (docs/durable.md; sundial.durable)

    def step(self, name: str, fn: Callable[[], T], *, retries: int = 0, backoff: float = 0.0) -> T:
        """Runs ``fn()`` once per job, not once per attempt: its result (any
        JSON value, at most 256 KiB encoded), or its final error, is
        recorded with the job under the attempt's fencing token, and a later
        attempt gets the recorded result back (or :class:`StepError`, for a
        recorded error) without running ``fn``; the result comes
        back as recorded, decoded from JSON (a tuple as a list), the same on
        every attempt. ``name`` identifies the step
        with its place in the handler's order: a handler whose steps changed
        under a running job raises :class:`NondeterminismError`.

        ``retries`` runs ``fn`` up to that many more times after it raises,
        waiting ``backoff`` seconds, then twice as long each time (at most a
        minute), before the step fails for good: the step's own retries,
        within one attempt. :class:`NoRetry` ends them at once (recorded as
        the step's error); :class:`Snooze`, :class:`Cancel`,
        :class:`RetryAfter` and :class:`LeaseLost` end the attempt and
        record nothing. A lost lease raises :class:`LeaseLost`: let it
        propagate. A side effect outside Sundial is done at least once: pass
        ``ctx.token`` (or a key made of the job's id and the step's name) to
        the system it writes, so that a second run is refused."""
        return self._durable.step(name, fn, retries, backoff)

    def sleep(self, seconds: float) -> None:
        """Parks the job for ``seconds``: raises :class:`Parked`, which ends
        the handler (let it propagate), and the worker parks the job,
        holding neither a thread nor a lease; it runs again once the time
        passed, skipping its recorded steps, and this call then returns."""
        self.sleep_until(time.time() + seconds)

    def sleep_until(self, when: Union[float, datetime]) -> None:
        """:meth:`sleep` until ``when`` (a datetime, or epoch seconds)."""
        self._durable.sleep_until(wake_time(when))

    def wait_signal(self, name: str, timeout: Optional[float] = None, key: Optional[str] = None) -> Any:
        """Waits for the signal ``name`` sent to the job
        (:meth:`Client.signal`) and returns its value. While it waits the
        job is parked, as in :meth:`sleep` (:class:`Parked` ends the
        handler), and runs again when the signal arrives, or when
        ``timeout`` seconds passed (None: no timeout): this call then raises
        :class:`SignalTimeout`. A signal sent before the wait began is kept
        and read at once. With ``key``, callers may send the signal to the
        key in the job's queue instead (:meth:`Client.signal_key`): an
        order number, say; a signal sent to the key before is the job's.
        A job takes one signal of each name."""
        return self._durable.wait_signal(name, timeout, key)


class _LeaseEvent(threading.Event):
    """A handler's ``cancelled``: asking it runs ``expired`` first, which
    sets it when the lease's bound has passed on the clock, even before the
    guard's timer ran (a process resumed after a pause)."""

    def __init__(self, expired: Callable[[], bool]) -> None:
        super().__init__()
        self._expired = expired

    def is_set(self) -> bool:
        self._expired()
        return super().is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        if self._expired():
            return True
        return super().wait(timeout) or self._expired()


class _Attempt:
    """One claimed job running on this worker."""

    def __init__(self, worker: "Worker", job: JSON, lease: JSON, claim_sent: float) -> None:
        self.worker = worker
        self.ttl = float(lease.get("ttl_seconds") or 15.0)
        self.ctx = JobContext(job, lease["token"], self.ttl, self)
        self.path = f"/v1/jobs/{job['id']}"
        self.lock = threading.Lock()
        self.renewed_at = claim_sent  # send time of the claim or of the last accepted renewal
        self.done = threading.Event()  # the attempt's outcome is settled: stop renewing
        self.lost = False
        self.lost_reason = ""
        self.abandoned = False
        # Set while a claim answered late (a long poll) awaits its first
        # renewal: the lease was granted some time after the claim was
        # sent, so the claim's send time bounds nothing yet. The handler
        # starts only once a renewal gave a bound; the guard waits for it.
        self.starting = False

    @property
    def margin(self) -> float:
        """The lease margin, the Go worker's: a fifth of the TTL, for clocks
        and delays (and what a shutdown leaves a signalled handler)."""
        return self.ttl / 5

    @property
    def trusted_until(self) -> float:
        """Until when (on ``_now``) the lease surely holds: the last accepted
        renewal's send time plus the TTL, less the margin."""
        return self.renewed_at + self.ttl - self.margin

    def renewed(self, sent: float) -> None:
        """Moves the bound to an accepted renewal's send time, unless the
        bound passed first: a lease once lost stays lost."""
        if self.expired():
            return
        with self.lock:
            self.renewed_at = max(self.renewed_at, sent)

    def expired(self) -> bool:
        """Marks the attempt lost when its lease can no longer be trusted
        (the bound passed on the clock); True once it is lost."""
        if self.starting or self.lost or self.done.is_set() or _now() < self.trusted_until:
            return self.lost
        if self.lose(LOST_IN_TIME):
            log.warning("job %s: %s; stopping it, reporting nothing", self.ctx.id, LOST_IN_TIME)
        return True

    def lose(self, reason: str) -> bool:
        """Marks the attempt lost and tells its handler; False when it
        already was."""
        with self.lock:
            if self.lost:
                return False
            self.lost, self.lost_reason = True, reason
        self.ctx.cancelled.set()
        return True

    def abandon(self) -> None:
        with self.lock:
            self.abandoned = True
            self.lost_reason = self.lost_reason or "the worker is shutting down"
        self.ctx.cancelled.set()
        self.done.set()


def _default_worker_id() -> str:
    host = re.sub(r"[^A-Za-z0-9_.:@-]", "-", socket.gethostname())[:80] or "host"
    return f"py-{host}-{os.getpid()}"


class Worker:
    """Runs jobs of the types it has handlers for.

    Args:
        queues: the queues to claim from, in order (default
            ``$SUNDIAL_QUEUES``, comma-separated, or ``default``).
        url, api_key: as for :class:`Client` (``$SUNDIAL_URL``,
            ``$SUNDIAL_API_KEY``); the key needs the ``work`` scope.
        concurrency: how many jobs run at once (each in a thread).
        worker_id: the name in ``GET /v1/workers`` and in job events
            (default ``$SUNDIAL_WORKER_ID`` or ``py-<host>-<pid>``).
        wait_seconds: the claim's long poll (0..60).
        shutdown_timeout: seconds running jobs get to finish after
            SIGTERM/SIGINT or :meth:`stop`; the jobs still running then are
            signalled and given back with ``POST /v1/jobs/{id}/release`` once
            their handlers returned, or after the lease margin (see :meth:`run`).
        timeout: seconds to wait for one answer of the API.
        keyring: a :class:`sundial.Keyring` (``Keyring.from_env()``): an
            encrypted payload is decrypted before the handler sees it, and
            that job's result and error text are encrypted under the
            primary key (docs/payloads.md, "Encryption"). A job whose payload
            is encrypted under a key the keyring lacks (or any key, without a
            keyring), or that does not decrypt, fails for good.
        clear_results, clear_errors: leave an encrypted job's result, or
            its error text, in the clear.
    """

    def __init__(
        self,
        queues: Optional[Sequence[str]] = None,
        *,
        url: Optional[str] = None,
        api_key: Optional[str] = None,
        concurrency: int = 1,
        worker_id: Optional[str] = None,
        wait_seconds: float = 20.0,
        shutdown_timeout: float = 30.0,
        timeout: float = 30.0,
        keyring: Optional[Keyring] = None,
        clear_results: bool = False,
        clear_errors: bool = False,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if queues is None:
            queues = [q for q in os.environ.get("SUNDIAL_QUEUES", "default").split(",") if q]
        self.queues = list(queues)
        self.concurrency = concurrency
        self.worker_id = worker_id or os.environ.get("SUNDIAL_WORKER_ID") or _default_worker_id()
        self.wait_seconds = wait_seconds
        self.shutdown_timeout = shutdown_timeout
        self.keyring = keyring
        self.clear_results = clear_results
        self.clear_errors = clear_errors
        self.transport = Transport(
            url or os.environ.get("SUNDIAL_URL") or DEFAULT_URL,
            api_key if api_key is not None else os.environ.get("SUNDIAL_API_KEY"),
            timeout=timeout,
        )
        self._handlers: Dict[str, Handler] = {}
        self._cond = threading.Condition()
        self._running: Dict[str, _Attempt] = {}
        self._stopping = threading.Event()
        self._claim_slot = ConnectionSlot()
        self._guard_wake = threading.Event()
        self._guard_at = float("inf")  # when the guard wakes next (on _now); under _cond
        self._guard_started = False

    # Handlers

    def handle(self, job_type: str, fn: Handler) -> None:
        """Runs ``fn`` for jobs of ``job_type``. Its return value is the
        job's result; an exception fails the attempt (retried while
        attempts remain), :class:`NoRetry` fails the job for good,
        :class:`RetryAfter` picks the retry's delay, :class:`Snooze` runs it
        again later without spending an attempt, :class:`Cancel` ends it
        cancelled."""
        self._handlers[job_type] = fn

    def handler(self, job_type: str) -> Callable[[Handler], Handler]:
        """The decorator form of :meth:`handle`."""

        def register(fn: Handler) -> Handler:
            self.handle(job_type, fn)
            return fn

        return register

    # Running

    def run(self, install_signal_handlers: bool = True) -> None:
        """Claims and runs jobs until SIGTERM or SIGINT (when called on the
        main thread with ``install_signal_handlers``) or :meth:`stop`.

        Then it stops claiming, lets running jobs finish for up to
        ``shutdown_timeout`` seconds and returns. A job still running at the
        deadline is signalled (``ctx.cancelled``), nothing is reported for
        it, and its lease is given back (``POST /v1/jobs/{id}/release``)
        once its handler returned, or after the lease margin (a fifth of
        the lease TTL) if it still runs then (logged as a warning): the job
        is queued again and the interrupted attempt does not count. If the
        release cannot be sent, the lease expires instead and the poller
        reclaims the job after one lease TTL (a counted attempt).
        """
        if not self._handlers:
            raise ValueError("no handlers: register one with handle() before run()")
        previous: Dict[signal.Signals, Any] = {}
        if install_signal_handlers and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, self._on_signal)
        try:
            log.info("worker %s serving %s at %s", self.worker_id, self.queues, self.transport.url)
            claimer = threading.Thread(target=self._claim_loop, name="sundial-claim", daemon=True)
            claimer.start()
            while not self._stopping.wait(0.5):
                pass
            deadline = time.monotonic() + self.shutdown_timeout
            while claimer.is_alive() and time.monotonic() < deadline:
                self._claim_slot.abort()
                claimer.join(0.05)
            with self._cond:
                while self._running and time.monotonic() < deadline:
                    self._cond.wait(min(0.2, max(0.0, deadline - time.monotonic())))
                left = list(self._running.values())
            for att in left:
                log.warning("job %s still running at the shutdown deadline: giving it back", att.ctx.id)
                att.abandon()
            self._give_back(left)
            log.info("worker %s stopped", self.worker_id)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def stop(self) -> None:
        """Asks :meth:`run` to stop (as SIGTERM does); returns at once."""
        self._stopping.set()
        self._claim_slot.abort()
        self._guard_wake.set()
        with self._cond:
            self._cond.notify_all()

    @property
    def running(self) -> List[str]:
        """The ids of the jobs running now."""
        with self._cond:
            return list(self._running)

    def _on_signal(self, signum: int, frame: Optional[FrameType]) -> None:
        log.info("worker %s: signal %d, stopping", self.worker_id, signum)
        self.stop()

    def _claim_loop(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            with self._cond:
                while len(self._running) >= self.concurrency and not self._stopping.is_set():
                    self._cond.wait()
                free = self.concurrency - len(self._running)
            if self._stopping.is_set():
                return
            body = {"worker_id": self.worker_id, "queues": self.queues, "types": list(self._handlers),
                    "max": free, "wait_seconds": self.wait_seconds}
            sent = _now()
            try:
                res = self.transport.request("POST", "/v1/claim", body, retries=0,
                                             timeout=self.wait_seconds + self.transport.timeout,
                                             on_connection=self._claim_slot)
            except InvalidArgument as exc:
                log.error("claim refused: %s", exc)
                self._stopping.wait(5.0)
                continue
            except (SundialError, ValueError) as exc:
                if self._stopping.is_set():
                    return
                failures += 1
                wait = min(5.0, 0.2 * 2 ** min(failures, 5))
                retry_after = exc.retry_after if isinstance(exc, ApiError) else None
                log.warning("claim failed (%s); trying again in %.1f s", exc, retry_after or wait)
                self._stopping.wait(retry_after or wait)
                continue
            except Exception:  # noqa: BLE001 - the loop must survive anything
                log.exception("claim failed")
                self._stopping.wait(1.0)
                continue
            failures = 0
            for claimed in res.body.get("jobs") or []:
                self._start(claimed["job"], claimed["lease"], sent)

    def _start(self, job: JSON, lease: JSON, claim_sent: float) -> None:
        att = _Attempt(self, job, lease, claim_sent)
        att.starting = _now() - claim_sent > att.margin
        with self._cond:
            self._running[att.ctx.id] = att
            if not att.starting:
                self._watch(att)
        threading.Thread(target=self._heartbeat_loop, args=(att,), name=f"sundial-lease-{att.ctx.id}",
                         daemon=True).start()
        threading.Thread(target=self._execute, args=(att,),
                         name=f"sundial-job-{att.ctx.id}", daemon=True).start()

    def _give_back(self, attempts: List[_Attempt]) -> None:
        """Gives back the leases of the attempts signalled at the shutdown
        deadline, each once its handler returned or, at the latest, once
        the lease margin passed (a fifth of its TTL, the margin the lease
        guard keeps): a job given back at once would run elsewhere while
        its handler here still unwinds. Nothing renews the leases
        meanwhile; the margin ends well before they expire."""
        start = time.monotonic()
        waiting = {att: start + att.margin for att in attempts}
        while waiting:
            with self._cond:
                while True:
                    now = time.monotonic()
                    ready = [att for att, end in waiting.items()
                             if self._running.get(att.ctx.id) is not att or now >= end]
                    if ready:
                        break
                    self._cond.wait(max(0.0, min(waiting.values()) - now))
                late = [att for att in ready if self._running.get(att.ctx.id) is att]
            for att in late:
                log.warning("job %s: its handler is still running %.1f s after it was signalled (the lease "
                            "margin); giving its lease back anyway", att.ctx.id, att.margin)
            for att in ready:
                del waiting[att]
                self._release(att)

    def _release(self, att: _Attempt) -> None:
        """Gives the lease back (shutdown): the job is queued again at once,
        the interrupted attempt not counted. A 409 means it had already
        ended (its outcome landed, or it was cancelled or reclaimed)."""
        try:
            self.transport.request("POST", att.path + "/release",
                                   {"token": att.ctx.token, "worker_id": self.worker_id},
                                   idempotent=True, retries=1, timeout=max(1.0, min(5.0, att.ttl / 2)))
            log.info("job %s: lease given back; it runs again elsewhere", att.ctx.id)
        except Conflict as exc:
            log.info("job %s: nothing to give back (%s)", att.ctx.id, exc.message)
        except SundialError as exc:
            log.warning("job %s: giving the lease back failed (%s); it runs again once the lease expires",
                        att.ctx.id, exc)

    def _watch(self, att: _Attempt) -> None:
        """Puts a new attempt under the lease guard (called under _cond):
        wakes the guard when its bound comes before the guard's next wake,
        and starts the guard with the first attempt."""
        if att.trusted_until < self._guard_at:
            self._guard_at = att.trusted_until
            self._guard_wake.set()
        if not self._guard_started:
            self._guard_started = True
            threading.Thread(target=self._guard, name="sundial-lease-guard", daemon=True).start()

    def _guard(self) -> None:
        """The lease guard, one thread for all running attempts: marks lost
        each whose lease can no longer be trusted, on time even while its
        renewal hangs, since it waits for no answer. It sleeps until the
        earliest bound, then looks again (accepted renewals move bounds
        later); a new attempt with an earlier bound wakes it. It ends once
        the worker stopped and nothing runs."""
        while True:
            with self._cond:
                if self._stopping.is_set() and not self._running:
                    return
                attempts = list(self._running.values())
            live = [att for att in attempts if not att.expired()]
            with self._cond:
                self._guard_at = min((att.trusted_until for att in live if not att.starting), default=float("inf"))
                left = self._guard_at - _now()
            self._guard_wake.wait(max(0.0, left) if left != float("inf") else None)
            self._guard_wake.clear()

    def _heartbeat_loop(self, att: _Attempt) -> None:
        while not att.done.wait(att.ttl / 3):
            if att.lost:
                return
            self._renew(att, None, "")

    def _renew(self, att: _Attempt, percent: Optional[int], message: str) -> bool:
        """Renews the lease (with progress when given); False once it is lost."""
        body: JSON = {"token": att.ctx.token, "worker_id": self.worker_id}
        if percent is not None:
            body["progress"] = percent
            if message:
                body["message"] = message[:1024]
        sent = _now()
        try:
            self.transport.request("POST", att.path + "/heartbeat", body, idempotent=True, retries=0,
                                   timeout=max(1.0, att.ttl / 2))
        except Conflict as exc:
            att.lose(f"lease lost: {exc.message}")
            log.warning("job %s: %s; stopping it, reporting nothing", att.ctx.id, exc.message)
            return False
        except SundialError as exc:
            if att.expired():
                return False
            log.info("job %s: renewal failed (%s); the next one tries again", att.ctx.id, exc)
            return not att.lost
        att.renewed(sent)
        return not att.lost

    def _execute(self, att: _Attempt) -> None:
        ctx = att.ctx
        try:
            # A claim that waited long may have been granted well after it was
            # sent: renew at once for a fresh bound on the lease, and start
            # the handler (and the guard) only with it.
            if att.starting:
                self._renew(att, None, "")
                att.starting = False
                if att.expired() or att.lost:
                    return
                with self._cond:
                    self._watch(att)
            handler = self._handlers.get(ctx.type)
            outcome: Optional[Dict[str, Any]] = None
            kind = "complete"
            raised: Optional[Parked] = None
            opened = False  # the payload was encrypted and is now decrypted: seal what goes back
            try:
                if handler is None:
                    raise NoRetry(f"no handler for job type {ctx.type!r} on worker {self.worker_id}")
                if is_encrypted(ctx.payload):
                    ctx.payload = self._open_payload(ctx.payload)
                    ctx.job = dict(ctx.job, payload=ctx.payload)
                    opened = True
                result = handler(ctx)
                json.dumps(result)  # a result that is not JSON fails the attempt here
                outcome = {"result": result}
            except Parked as exc:
                raised = exc
            except LeaseLost as exc:
                if not att.lost:
                    kind, outcome = "fail", {"error": _message(exc), "retry": True}
            except NoRetry as exc:
                kind, outcome = "fail", {"error": _message(exc), "retry": False}
            except Snooze as exc:
                kind, outcome = "snooze", {"delay_seconds": exc.seconds, "reason": exc.reason[:MAX_ERROR_BYTES]}
            except Cancel as exc:
                kind, outcome = "fail", {"error": _message(exc), "cancel": True}
            except RetryAfter as exc:
                kind, outcome = "fail", {"error": _message(exc), "retry_in_seconds": exc.seconds}
            except Exception as exc:  # noqa: BLE001 - any failure of the handler fails the attempt
                kind, outcome = "fail", {"error": _message(exc), "retry": True}
            parked = ctx._durable.parked or raised
            if parked is not None:
                # A sleep or a wait parked the attempt: it ends parked, even
                # when the handler caught Parked and went on.
                if raised is None:
                    log.warning("job %s: the handler caught sundial.Parked and went on (re-raise it); "
                                "parking the job all the same", ctx.id)
                kind, outcome = "park", {"delay_seconds": parked.delay_seconds}
                if parked.signal:
                    outcome["signal"] = parked.signal
            if opened and outcome is not None:
                self._seal(outcome)
            # The attempt's last log lines go before its outcome: once the
            # outcome landed, the attempt's token no longer takes them.
            ctx.log.close(send=not (att.expired() or att.abandoned))
            if att.expired() or att.abandoned:
                log.info("job %s: %s; its outcome is not reported", ctx.id, att.lost_reason)
                return
            if outcome is not None:
                outcome.update(token=ctx.token, worker_id=self.worker_id)
                self._report(att, kind, outcome)
        finally:
            ctx.log.close(send=False)
            att.done.set()
            with self._cond:
                if self._running.get(ctx.id) is att:
                    del self._running[ctx.id]
                self._cond.notify_all()

    def _open_payload(self, payload: Any) -> Any:
        """The plaintext of an encrypted payload; a key the keyring lacks, or
        a payload that does not decrypt, fails the job for good."""
        try:
            if self.keyring is None:
                raise MissingKey(PAYLOAD, key_id(payload) or "")
            return self.keyring.open(PAYLOAD, payload)
        except MissingKey as exc:
            raise NoRetry(f'payload encrypted with key "{exc.key_id}", which this worker\'s keyring lacks') from None
        except EncryptionError as exc:
            raise NoRetry(str(exc)) from None

    def _seal(self, outcome: Dict[str, Any]) -> None:
        """Encrypts an encrypted job's result and error text (unless
        ``clear_results``/``clear_errors``) under the keyring's primary key."""
        assert self.keyring is not None
        if outcome.get("result") is not None and not self.clear_results:
            outcome["result"] = self.keyring.seal(RESULT, outcome["result"])
        for field in ("error", "reason"):
            if outcome.get(field) and not self.clear_errors:
                # The API takes at most MAX_ERROR_BYTES: cut the text until its sealed form fits.
                text = outcome[field]
                sealed = self.keyring.seal_text(ERROR, text)
                while len(sealed) > MAX_ERROR_BYTES:
                    text = text[: len(text) // 2] + "..."
                    sealed = self.keyring.seal_text(ERROR, text)
                outcome[field] = sealed

    def _report(self, att: _Attempt, kind: str, body: JSON) -> None:
        """Sends the outcome (complete or fail), again after a broken
        connection or a 429/5xx, while the lease can be trusted (heartbeats
        go on meanwhile). A complete is retried as a complete, never turned
        into a fail."""
        broken = False
        tries = 0
        last: Optional[SundialError] = None
        while not att.abandoned:
            if _now() >= att.trusted_until:
                log.error("job %s: could not report %s while its lease could be trusted (%s); it will run again",
                          att.ctx.id, kind, last)
                return
            try:
                res = self.transport.request("POST", f"{att.path}/{kind}", body, retries=0)
                log.debug("job %s: %s -> %s", att.ctx.id, kind, res.body.get("state"))
                return
            except Conflict as exc:
                if broken:
                    log.info("job %s: %s refused after a broken connection (%s): the first one "
                             "probably landed", att.ctx.id, kind, exc.message)
                else:
                    log.warning("job %s: %s refused: %s", att.ctx.id, kind, exc.message)
                return
            except (TransportError, ApiError) as exc:
                if isinstance(exc, ApiError) and exc.status not in (429, 500, 502, 503, 504):
                    log.error("job %s: %s refused: %s", att.ctx.id, kind, exc)
                    return
                broken, last = broken or isinstance(exc, TransportError), exc
                left = att.trusted_until - _now()
                wait = exc.retry_after if isinstance(exc, ApiError) and exc.retry_after else \
                    self.transport.delay(min(tries, 4))
                log.warning("job %s: reporting %s failed (%s); trying again", att.ctx.id, kind, exc)
                time.sleep(max(0.0, min(wait, left)))
                tries += 1


def _message(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    data = text.encode("utf-8")
    if len(data) > MAX_ERROR_BYTES:
        text = data[: MAX_ERROR_BYTES - 3].decode("utf-8", "ignore") + "..."
    return text

