"""Durable execution for the worker (docs/durable.md), the Go worker's
semantics over the REST routes: a handler's steps run once per job, not
once per attempt. Each durable call (``ctx.step``, ``ctx.sleep``,
``ctx.wait_signal``) takes the next place in the handler's order; what it
did is recorded with the job under the attempt's fencing token (``POST
/v1/jobs/{id}/steps``), and a later attempt (after a crash, a deploy, a
sleep, a wait) gets it back instead of doing it again. The handler must
make the same calls in the same order on every attempt."""

import calendar
import json
import math
import re
import threading
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple, TypeVar, Union

from .errors import (Cancel, Conflict, LeaseLost, NondeterminismError, NoRetry, Parked, RetryAfter, SignalTimeout,
                     Snooze, StepError)

if TYPE_CHECKING:
    from .worker import _Attempt

JSON = Dict[str, Any]
T = TypeVar("T")

MAX_STEP_BYTES = 256 << 10
"""The most a step's result (JSON), its error or a signal's value may take."""

MAX_PARK_SECONDS = 365 * 24 * 3600
"""The longest park: a wait for a signal without a timeout parks this long."""

_OUTCOMES = (Snooze, Cancel, RetryAfter, LeaseLost)
"""What a step's function may raise that ends the attempt, not the step:
it is not recorded (the Go worker's outcomes, and a lost lease)."""


def check_name(what: str, name: str) -> None:
    """Refuses a name a record cannot hold (NoRetry: the code must change)."""
    if not isinstance(name, str) or not name or len(name) > 200 or any(c in name for c in "\t\r\n"):
        raise NoRetry(f"sundial: {what} name {name!r}: want 1 to 200 characters without tabs or line breaks")


def format_time(t: float) -> str:
    """An epoch time in the API's format: RFC 3339, milliseconds, UTC."""
    ms = int(round(t * 1000))
    return datetime.fromtimestamp(ms // 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


_TIME = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(?:\.(\d+))?(?:([Zz])|([+-])(\d\d):(\d\d))$")


def parse_time(s: str) -> float:
    """An RFC 3339 time as epoch seconds."""
    m = _TIME.match(s)
    if not m:
        raise ValueError(f"not an RFC 3339 time: {s!r}")
    y, mo, d, h, mi, sec = (int(m.group(i)) for i in range(1, 7))
    t = calendar.timegm((y, mo, d, h, mi, sec, 0, 0, 0)) + float("0." + (m.group(7) or "0"))
    if m.group(9):
        off = int(m.group(10)) * 3600 + int(m.group(11)) * 60
        t -= off if m.group(9) == "+" else -off
    return t


def _truncate(text: str) -> str:
    data = text.encode("utf-8")
    if len(data) <= MAX_STEP_BYTES:
        return text
    return data[:MAX_STEP_BYTES].decode("utf-8", "ignore")


class Durable:
    """What one attempt knows of its job's records: loaded once at the
    first durable call (``GET /v1/jobs/{id}``), kept up to date by the
    calls that record."""

    def __init__(self, attempt: "_Attempt") -> None:
        self._att = attempt
        self._lock = threading.Lock()
        self._loaded = False
        self._seq = 0
        self._steps: Dict[int, JSON] = {}
        self._signals: Dict[str, JSON] = {}
        self.parked: Optional[Parked] = None
        """The park a sleep or a wait raised in this attempt: the attempt
        ends parked whatever the handler does after it."""

    # The records

    def _load(self) -> None:
        with self._lock:
            if self._loaded:
                return
        job = self._att.worker.transport.request("GET", self._att.path).body or {}
        rec = job.get("durable") or {}
        with self._lock:
            if self._loaded:
                return
            for s in rec.get("steps") or []:
                self._steps[int(s["seq"])] = s
            for s in rec.get("signals") or []:
                self._signals[s["name"]] = s
            self._loaded = True

    def _next(self, name: str) -> Tuple[int, Optional[JSON]]:
        """Takes the next place in the handler's order and returns it with
        what is recorded there (None for nothing), after checking that what
        is recorded there has the name the handler gives it."""
        if self.parked is not None:
            raise self.parked  # the attempt is parked: nothing more runs in it
        self._att.ctx.check()
        self._load()
        with self._lock:
            self._seq += 1
            seq = self._seq
            have = self._steps.get(seq)
        if have is not None and have.get("name") != name:
            raise NondeterminismError(seq, str(have.get("name")), name)
        return seq, have

    def _record(self, seq: int, body: JSON) -> JSON:
        """Records the step at seq and returns the step that holds there now
        (the one sent, or one recorded before: the answer wins). A 409 is a
        lost lease: the attempt stops, reporting nothing."""
        att = self._att
        body = dict(body, token=att.ctx.token, worker_id=att.worker.worker_id, seq=seq)
        try:
            res = att.worker.transport.request("POST", att.path + "/steps", body, idempotent=True)
        except Conflict as exc:
            att.lose(f"lease lost: {exc.message}")
            raise LeaseLost(att.lost_reason) from exc
        answer = res.body or {}
        step: JSON = answer["step"]
        with self._lock:
            self._steps[seq] = step
            sig = answer.get("signal")
            if sig and body.get("signal"):
                self._signals[body["signal"]] = sig
        return step

    def _park(self, delay: float, signal: Optional[str] = None) -> Parked:
        delay = min(max(0.0, math.ceil(delay * 1000) / 1000), float(MAX_PARK_SECONDS))
        self.parked = Parked(delay, signal)
        return self.parked

    # The calls

    def step(self, name: str, fn: Callable[[], T], retries: int = 0, backoff: float = 0.0) -> T:
        check_name("step", name)
        seq, rec = self._next(name)
        if rec is None:
            started = time.time()
            failure: Optional[BaseException] = None
            try:
                value = self._run(fn, max(0, retries), max(0.0, backoff))
            except _OUTCOMES:
                raise  # the attempt ends; the step did not
            except Exception as exc:  # noqa: BLE001 - the step's final error is recorded
                if self._att.ctx.cancelled.is_set():
                    raise
                failure = exc
            body: JSON = {"name": name, "started_at": format_time(started)}
            if failure is None:
                try:
                    data = json.dumps(value, separators=(",", ":"))
                except (TypeError, ValueError) as exc:
                    raise NoRetry(f"sundial: step {name!r}: the result does not encode to JSON: {exc}") from exc
                if len(data.encode("utf-8")) > MAX_STEP_BYTES:
                    raise NoRetry(f"sundial: step {name!r}: the result is {len(data.encode('utf-8'))} bytes; "
                                  f"at most {MAX_STEP_BYTES} are kept")
                body.update(status="ok", result=value)
            else:
                body.update(status="err", error=_truncate(str(failure).strip() or type(failure).__name__))
            rec = self._record(seq, body)
        if rec.get("status") == "err":
            raise StepError(name, str(rec.get("error") or ""))
        return rec.get("result")  # type: ignore[no-any-return]

    def _run(self, fn: Callable[[], T], retries: int, backoff: float) -> T:
        """Runs fn with the step's own retries: backoff, then twice as long
        each time (at most a minute)."""
        wait = backoff
        tries = 0
        while True:
            try:
                return fn()
            except _OUTCOMES:
                raise
            except NoRetry:
                raise
            except Exception:
                if tries >= retries or self._att.ctx.cancelled.is_set():
                    raise
            tries += 1
            if self._att.ctx.cancelled.wait(wait):
                raise LeaseLost(self._att.lost_reason or "lease lost")
            wait = min(2 * wait, 60.0)

    def sleep_until(self, wake: float) -> None:
        seq, rec = self._next("sleep")
        now = time.time()
        if rec is None:
            rec = self._record(seq, {"name": "sleep", "status": "wait", "started_at": format_time(now),
                                     "deadline": format_time(wake)})
        if rec.get("status") != "wait":
            return  # over
        until = parse_time(rec["deadline"]) if rec.get("deadline") else now
        if now < until:
            raise self._park(until - now)
        # Over: recorded as done, so that the job's page shows it ended.
        self._record(seq, {"name": "sleep", "status": "ok", "started_at": rec["started_at"]})

    def wait_signal(self, name: str, timeout: Optional[float] = None, key: Optional[str] = None) -> Any:
        check_name("signal", name)
        if key is not None:
            check_name("signal key", key)
        step_name = "signal:" + name
        seq, rec = self._next(step_name)
        now = time.time()
        if rec is None:
            body: JSON = {"name": step_name, "status": "wait", "started_at": format_time(now), "signal": name}
            if timeout:
                body["deadline"] = format_time(now + timeout)
            if key is not None:
                body["signal_key"] = key
            rec = self._record(seq, body)
        status = rec.get("status")
        if status == "timeout":
            raise SignalTimeout(name)
        if status == "ok":
            return rec.get("result")
        with self._lock:
            sig = self._signals.get(name)
        if sig is not None:
            body = {"name": step_name, "status": "ok", "started_at": rec["started_at"]}
            if sig.get("value") is not None:
                body["result"] = sig["value"]
            return self._ended(name, self._record(seq, body))
        deadline = parse_time(rec["deadline"]) if rec.get("deadline") else None
        if deadline is not None and now >= deadline:
            return self._ended(name, self._record(seq, {"name": step_name, "status": "timeout",
                                                        "started_at": rec["started_at"],
                                                        "deadline": rec["deadline"]}))
        raise self._park(deadline - now if deadline is not None else MAX_PARK_SECONDS, name)

    @staticmethod
    def _ended(name: str, rec: JSON) -> Any:
        """The value of a wait's final record, or its timeout."""
        if rec.get("status") == "timeout":
            raise SignalTimeout(name)
        return rec.get("result")


def wake_time(when: Union[float, int, datetime]) -> float:
    """A sleep's end as epoch seconds: a datetime (naive: local time) or
    epoch seconds."""
    if isinstance(when, datetime):
        return when.timestamp()
    return float(when)
