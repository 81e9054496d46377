"""Per-job logs for the worker: ``ctx.log.info("charged", amount=42)`` in a
handler buffers a line, and the worker sends the buffered lines with ``POST
/v1/jobs/{id}/logs`` under the attempt's fencing token: every 200 ms while
the handler runs, and once more when it ends, before its outcome. Logging
never blocks the handler on the network; a line the API cannot take (the
attempt is no longer the job's running one: 404 or 409) is dropped
silently."""

import json
import logging
import threading
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple, Union

from .errors import ApiError, SundialError

if TYPE_CHECKING:
    from .worker import Worker, _Attempt

log = logging.getLogger("sundial.worker")

FLUSH_INTERVAL = 0.2
"""How often a running attempt's buffered lines are sent, in seconds."""

MAX_LINES_PER_CALL = 100
"""The most lines one ``POST /v1/jobs/{id}/logs`` takes."""

MAX_MESSAGE_BYTES = 8 << 10
"""The longest message the API keeps (it cuts longer ones); cut here too."""

MAX_FIELDS = 20
"""The most fields a line keeps (the first 20, in the order given)."""

MAX_BUFFERED = 1000
"""The most lines held while the API cannot take them; the oldest go first
(counted in :attr:`JobLog.dropped`)."""

LEVELS = ("debug", "info", "warn", "error")


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return str(value)


def _cut(message: str) -> str:
    data = message.encode("utf-8")
    if len(data) <= MAX_MESSAGE_BYTES:
        return message
    return data[:MAX_MESSAGE_BYTES].decode("utf-8", "ignore")


class JobLog:
    """A handler's logger, ``ctx.log``: ``debug``, ``info``, ``warn``
    (``warning``) and ``error`` take a message and a few fields as keywords
    (values that are not strings are sent as JSON text). The lines are kept
    with the job (``GET /v1/jobs/{id}/logs``, :meth:`Client.logs`, the
    dashboard's job page, ``sundial jobs logs``)."""

    def __init__(self, worker: "Worker", attempt: "_Attempt") -> None:
        self._worker = worker
        self._attempt = attempt
        self._lock = threading.Lock()
        self._buffer: List[Tuple[int, Dict[str, Any]]] = []  # (number, line), oldest first
        self._numbered = 0
        self._closed = False
        self._refused = False  # the API said the attempt is gone: drop what comes
        self._wake = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._sending = threading.Lock()
        self.dropped = 0
        """Lines dropped here: the buffer was full while the API could not
        take them, or the API refused the attempt's lines (404, 409)."""

    def debug(self, message: str, **fields: Any) -> None:
        self.log("debug", message, **fields)

    def info(self, message: str, **fields: Any) -> None:
        self.log("info", message, **fields)

    def warn(self, message: str, **fields: Any) -> None:
        self.log("warn", message, **fields)

    warning = warn

    def error(self, message: str, **fields: Any) -> None:
        self.log("error", message, **fields)

    def log(self, level: str, message: str, **fields: Any) -> None:
        """Buffers one line at ``level`` (debug, info, warn or error); the
        worker sends it within 200 ms. Returns at once."""
        if level == "warning":
            level = "warn"
        if level not in LEVELS:
            raise ValueError(f"level must be one of {', '.join(LEVELS)}, not {level!r}")
        line: Dict[str, Any] = {"level": level, "message": _cut(_text(message))}
        if fields:
            line["fields"] = {str(k): _text(v) for k, v in list(fields.items())[:MAX_FIELDS]}
        with self._lock:
            if self._closed or self._refused:
                self.dropped += 1
                return
            self._numbered += 1
            self._buffer.append((self._numbered, line))
            if len(self._buffer) > MAX_BUFFERED:
                del self._buffer[0]
                self.dropped += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=f"sundial-log-{self._attempt.ctx.id}",
                                                daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        while not self._wake.wait(FLUSH_INTERVAL):
            self._flush(final=False)

    def close(self, send: bool) -> None:
        """Ends the attempt's logging: stops the flusher and, with ``send``,
        sends what is left (once, bounded by the lease) before the outcome
        goes; without it (the lease is lost) drops it."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(max(1.0, self._attempt.ttl / 2))
        if send:
            self._flush(final=True)
        with self._lock:
            self.dropped += len(self._buffer)
            self._buffer.clear()

    def _flush(self, final: bool) -> None:
        with self._sending:
            while True:
                with self._lock:
                    if self._refused or not self._buffer:
                        return
                    batch = self._buffer[:MAX_LINES_PER_CALL]
                if self._attempt.lost or self._attempt.abandoned:
                    return
                sent = self._send([line for _, line in batch], final)
                with self._lock:
                    if sent is None:  # refused: the attempt is gone
                        self._refused = True
                        self.dropped += len(self._buffer)
                        self._buffer.clear()
                        return
                    if sent is False:  # the API could not take them now: the next flush tries again
                        return
                    if sent == "bad":
                        self.dropped += len(batch)
                    last = batch[-1][0]
                    self._buffer = [(n, line) for n, line in self._buffer if n > last]

    def _send(self, lines: List[Dict[str, Any]], final: bool) -> Union[bool, str, None]:
        """True when sent, False to try again later, None when the attempt
        is gone (404, 409), "bad" when the API will never take these lines."""
        att = self._attempt
        try:
            self._worker.transport.request("POST", att.path + "/logs", {"token": att.ctx.token, "lines": lines},
                                           retries=1 if final else 0, idempotent=False,
                                           timeout=max(1.0, min(5.0, att.ttl / 2)))
            return True
        except ApiError as exc:
            if exc.status in (404, 409):
                return None
            if exc.status in (400, 413):  # lines the API will never take: do not loop on them
                log.warning("job %s: log lines refused: %s", att.ctx.id, exc)
                return "bad"
            log.debug("job %s: sending log lines failed (%s)", att.ctx.id, exc)
            return False
        except SundialError as exc:
            log.debug("job %s: sending log lines failed (%s)", att.ctx.id, exc)
            return False

