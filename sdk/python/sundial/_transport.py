"""HTTP to the Sundial API: JSON in and out, the API key, request ids, and
retries with backoff (429 and 503 always, honouring ``Retry-After``; a broken
connection only for calls that are safe to repeat)."""

import email.utils
import http.client
import json
import random
import secrets
import socket
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .errors import ApiError, TransportError, api_error

Query = Mapping[str, Union[str, int, float, Sequence[str], None]]

# The statuses after which a request is tried again: the API refused it
# before doing anything (429) or could not reach its store (503).
RETRY_STATUSES = (429, 503)


def parse_retry_after(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """Seconds to wait from a ``Retry-After`` header: delay-seconds or an
    HTTP date. None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class Response:
    """A successful answer: status, decoded JSON body (None when empty) and
    headers (lower-case names)."""

    def __init__(self, status: int, body: Any, headers: Dict[str, str]) -> None:
        self.status = status
        self.body = body
        self.headers = headers

    @property
    def request_id(self) -> Optional[str]:
        return self.headers.get("x-request-id")


class Transport:
    """Sends requests to one API base URL.

    Args:
        url: the API's base URL, e.g. ``http://127.0.0.1:8080`` (a path
            prefix is kept).
        api_key: sent as ``Authorization: Bearer <key>`` when set.
        timeout: seconds to wait for an answer (a long poll adds its wait).
        max_retries: how many times a call is tried again after 429, 503 or
            (for calls safe to repeat) a broken connection.
        backoff: the first wait between tries, in seconds; doubled each
            time, with jitter, up to ``max_backoff``.
        max_backoff: the longest wait between tries; a ``Retry-After``
            longer than this is not waited for: the error is raised.
    """

    def __init__(
        self,
        url: str,
        api_key: Optional[str] = None,
        timeout: float = 30.0,
        max_retries: int = 4,
        backoff: float = 0.2,
        max_backoff: float = 30.0,
    ) -> None:
        parts = urllib.parse.urlsplit(url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.url = url.rstrip("/")
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path
        self.api_key = api_key or None
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def delay(self, attempt: int) -> float:
        """The wait before try ``attempt + 1`` (attempt counts from 0)."""
        base = min(self.max_backoff, self.backoff * 2.0**attempt)
        return base / 2 + random.uniform(0, base / 2)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: Optional[Query] = None,
        idempotent: Optional[bool] = None,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
        on_connection: Optional[Callable[[Optional[http.client.HTTPConnection]], None]] = None,
    ) -> Response:
        """Sends one call, trying again as the class says, and returns the
        answer or raises :class:`ApiError` / :class:`TransportError`.

        ``idempotent`` says whether a call whose connection broke may be
        sent again (default: GET, PUT, DELETE and PATCH are). ``on_connection``
        is told the connection of each try (and None after it), so that
        another thread can abort a long poll by shutting its socket down.
        """
        if idempotent is None:
            idempotent = method in ("GET", "HEAD", "PUT", "DELETE", "PATCH")
        retries = self.max_retries if retries is None else retries
        request_id = "sdk-py-" + secrets.token_hex(8)
        target = self._prefix + path
        if query:
            pairs: List[Tuple[str, str]] = []
            for key, value in query.items():
                if isinstance(value, (list, tuple)):
                    pairs.extend((key, str(v)) for v in value)
                elif value is not None:
                    pairs.append((key, str(value)))
            if pairs:
                target += "?" + urllib.parse.urlencode(pairs)
        payload: Optional[bytes] = None
        headers = {"Accept": "application/json", "X-Request-Id": request_id}
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        attempt = 0
        while True:
            try:
                status, data, answer_headers = self._send(
                    method, target, payload, headers, timeout or self.timeout, on_connection
                )
            except (OSError, http.client.HTTPException) as exc:
                if idempotent and attempt < retries:
                    time.sleep(self.delay(attempt))
                    attempt += 1
                    continue
                raise TransportError(f"{method} {path}: {exc.__class__.__name__}: {exc}") from exc
            decoded = _decode(data)
            if 200 <= status < 300:
                return Response(status, decoded, answer_headers)
            retry_after = parse_retry_after(answer_headers.get("retry-after"))
            err = api_error(status, decoded, answer_headers.get("x-request-id"), retry_after)
            if status in RETRY_STATUSES and attempt < retries:
                wait = retry_after if retry_after is not None else self.delay(attempt)
                if wait <= self.max_backoff:
                    time.sleep(wait)
                    attempt += 1
                    continue
            raise err

    def _send(
        self,
        method: str,
        target: str,
        payload: Optional[bytes],
        headers: Dict[str, str],
        timeout: float,
        on_connection: Optional[Callable[[Optional[http.client.HTTPConnection]], None]],
    ) -> Tuple[int, bytes, Dict[str, str]]:
        conn = self._connection(timeout)
        if on_connection:
            on_connection(conn)
        try:
            conn.request(method, target, body=payload, headers=headers)
            res = conn.getresponse()
            data = res.read()
            return res.status, data, {k.lower(): v for k, v in res.getheaders()}
        finally:
            if on_connection:
                on_connection(None)
            conn.close()


def _decode(data: bytes) -> Any:
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return {"error": {"code": "", "message": data[:200].decode("utf-8", "replace")}}


def abort_connection(conn: Optional[http.client.HTTPConnection]) -> None:
    """Breaks a connection another thread waits on (a long poll), so that
    its read ends at once."""
    sock = getattr(conn, "sock", None) if conn is not None else None
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class ConnectionSlot:
    """Holds the connection of a call in flight so another thread can abort it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conn: Optional[http.client.HTTPConnection] = None
        self._aborted = False

    def __call__(self, conn: Optional[http.client.HTTPConnection]) -> None:
        with self._lock:
            self._conn = conn
            if conn is not None and self._aborted:
                # abort before the socket exists: make connect() fail at once
                conn.timeout = 0.001

    def abort(self) -> None:
        with self._lock:
            self._aborted = True
            abort_connection(self._conn)
