"""The errors of the Sundial SDK.

Every answer of the API that is not a success becomes an :class:`ApiError`
(a subclass per error code, e.g. :class:`NotFound`), carrying the HTTP
status, the API's ``code``, ``message`` and ``field``, and the request id of
the answer (``X-Request-Id``), which the API's logs carry too.
"""

from typing import Any, Dict, Optional, Type


class SundialError(Exception):
    """The base of every error this package raises."""


class TransportError(SundialError):
    """The API could not be reached, or the connection broke before an answer."""


class ApiError(SundialError):
    """The API answered with an error.

    Attributes:
        status: the HTTP status (400, 404, 409, 429, 503, ...).
        code: the API's error code (``invalid_argument``, ``not_found``, ...).
        message: the API's message.
        field: the input at fault (``priority``, ``jobs[3].run_at``), or None.
        request_id: the answer's ``X-Request-Id``, or None.
        retry_after: seconds the API asked to wait (``Retry-After``), or None.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: Optional[str] = None,
        request_id: Optional[str] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.request_id = request_id
        self.retry_after = retry_after

    def __str__(self) -> str:
        where = f" (field {self.field})" if self.field else ""
        rid = f" [request {self.request_id}]" if self.request_id else ""
        return f"{self.status} {self.code}: {self.message}{where}{rid}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status!r}, code={self.code!r}, "
            f"message={self.message!r}, field={self.field!r}, request_id={self.request_id!r})"
        )


class InvalidArgument(ApiError):
    """400 invalid_argument: validation failed; ``field`` names the input."""


class Unauthenticated(ApiError):
    """401 unauthenticated: a missing or wrong API key."""


class PermissionDenied(ApiError):
    """403 permission_denied: the key lacks the scope the route needs."""


class NotFound(ApiError):
    """404 not_found: no such job, queue, schedule, limit or route."""


class Conflict(ApiError):
    """409 conflict: the job's state forbids the action, or a lease was lost."""


class PayloadTooLarge(ApiError):
    """413 payload_too_large."""


class UnsupportedMediaType(ApiError):
    """415 unsupported_media_type."""


class RateLimited(ApiError):
    """429 rate_limited: retried by the client, then raised."""


class InternalError(ApiError):
    """500 internal."""


class Unavailable(ApiError):
    """503 unavailable: Redis (or the history store) cannot be reached."""


_BY_CODE: Dict[str, Type[ApiError]] = {
    "invalid_argument": InvalidArgument,
    "unauthenticated": Unauthenticated,
    "permission_denied": PermissionDenied,
    "not_found": NotFound,
    "conflict": Conflict,
    "payload_too_large": PayloadTooLarge,
    "unsupported_media_type": UnsupportedMediaType,
    "rate_limited": RateLimited,
    "internal": InternalError,
    "unavailable": Unavailable,
}

_CODE_BY_STATUS: Dict[int, str] = {
    400: "invalid_argument",
    401: "unauthenticated",
    403: "permission_denied",
    404: "not_found",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
    500: "internal",
    503: "unavailable",
}


def api_error(
    status: int,
    body: Any,
    request_id: Optional[str] = None,
    retry_after: Optional[float] = None,
) -> ApiError:
    """Builds the error for an answer: the API's error body when it has one
    (``{"error": {"code", "message", "field"}}``), else one from the status."""
    detail: Dict[str, Any] = {}
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        detail = body["error"]
    code = str(detail.get("code") or _CODE_BY_STATUS.get(status, "unknown"))
    message = str(detail.get("message") or f"HTTP {status}")
    field = detail.get("field")
    cls = _BY_CODE.get(code, ApiError)
    return cls(status, code, message, field if isinstance(field, str) else None, request_id, retry_after)


class WaitTimeout(SundialError, TimeoutError):
    """:meth:`Client.wait` ran out of time; ``job`` is the job as last read."""

    def __init__(self, job_id: str, timeout: float, job: Optional[Dict[str, Any]]) -> None:
        state = job.get("state") if job else "unknown"
        super().__init__(f"job {job_id} did not end within {timeout:g} s (state {state})")
        self.job = job


class LeaseLost(SundialError):
    """The worker no longer holds the job's lease (reclaimed, cancelled,
    finished, past its timeout, or not renewed in time): stop working on it.
    Raised by :meth:`JobContext.progress`."""


class NoRetry(Exception):
    """Raise it (or a subclass) from a handler to fail the job without a
    retry: it goes to the dead letters at once (``fail`` with
    ``retry: false``)."""


class Snooze(Exception):
    """Raise it from a handler to run the job again after ``seconds``
    (0: queued again at once) without spending an attempt: the attempt
    ends, ``max_attempts`` grows by one, and a ``snoozed`` event records
    ``reason``. For "not yet", not for failures."""

    def __init__(self, seconds: float, reason: str = "") -> None:
        if not 0 <= seconds <= 365 * 24 * 3600:
            raise ValueError("seconds must be 0..31536000")
        super().__init__(reason or f"snoozed for {seconds} s")
        self.seconds = seconds
        self.reason = reason


class Cancel(Exception):
    """Raise it from a handler to end the job ``cancelled``, not dead, with
    the message as its reason: the job must not run (its dependents are
    cancelled too)."""


class RetryAfter(Exception):
    """Raise it from a handler to fail the attempt with its retry after
    ``seconds`` instead of the job's backoff (e.g. a 429's Retry-After).
    The attempt counts: without attempts left the job goes dead."""

    def __init__(self, seconds: float, message: str = "") -> None:
        if not 0 < seconds <= 365 * 24 * 3600:
            raise ValueError("seconds must be more than 0 and at most 31536000")
        super().__init__(message or f"retry after {seconds} s")
        self.seconds = seconds


class Parked(BaseException):
    """Raised by :meth:`JobContext.sleep` and :meth:`JobContext.wait_signal`
    while the job must wait: it ends the handler, and the worker parks the
    job (``POST /v1/jobs/{id}/park``) instead of reporting an outcome. The
    attempt is given back; the job runs again when the sleep ends or the
    signal arrives, skipping its recorded steps.

    It derives from ``BaseException``, as ``KeyboardInterrupt`` does, so
    that ``except Exception`` does not catch it. A bare ``except:`` or an
    ``except BaseException`` does: re-raise it there (``except Parked:
    raise``). A handler that swallows it is parked all the same, and its
    durable calls after that raise it again (logged as a warning)."""

    def __init__(self, delay_seconds: float, signal: Optional[str] = None) -> None:
        what = f"the signal {signal!r}" if signal else "a sleep's end"
        super().__init__(f"parked for {delay_seconds:g} s at most, waiting for {what}")
        self.delay_seconds = delay_seconds
        self.signal = signal


class NondeterminismError(SundialError):
    """The handler's steps no longer match what the job recorded: the code
    changed under a running job. The attempt fails (and is retried, so that
    rolling the code back lets the job go on)."""

    def __init__(self, seq: int, recorded: str, in_code: str) -> None:
        super().__init__(
            f"sundial: step {seq} is {_quote(in_code)} in the handler but the job recorded {_quote(recorded)} "
            f"there: the handler's steps changed under a running job (docs/durable.md, \"Versioning\")")
        self.seq = seq
        self.recorded = recorded
        self.in_code = in_code


class StepError(Exception):
    """A step's final error as recorded: raised by the attempt that ran the
    step and by every later one, without running it again."""

    def __init__(self, step: str, message: str) -> None:
        super().__init__(f"step {_quote(step)} failed: {message}")
        self.step = step
        self.message = message


class SignalTimeout(SundialError, TimeoutError):
    """:meth:`JobContext.wait_signal`'s timeout passed before the signal
    arrived. It is recorded: a later attempt gets it too."""

    def __init__(self, name: str) -> None:
        super().__init__(f"sundial: the wait for the signal {_quote(name)} timed out")
        self.name = name


def _quote(s: str) -> str:
    """s in double quotes, as Go's %q writes a plain name."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
