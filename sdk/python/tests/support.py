"""What the SDK's tests share: the API under test (SUNDIAL_URL,
SUNDIAL_API_KEY), unique queue names, waiting on conditions with deadlines,
a worker running in a thread, a scripted HTTP server and a forwarding proxy
that can drop connections."""

import http.client
import http.server
import json
import os
import secrets
import threading
import time
import unittest
import urllib.parse
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, TypeVar

from sundial import Client, Worker

URL = os.environ.get("SUNDIAL_URL", "")
API_KEY = os.environ.get("SUNDIAL_API_KEY") or None
LONG_LEASE_URL = os.environ.get("SUNDIAL_LONG_LEASE_URL", "")
"""A second API over the same Redis whose leases last 5 s, not 1 s: a lease
margin (a fifth) long enough for a handler's cleanup."""


def need_api(case: unittest.TestCase) -> None:
    if not URL:
        case.skipTest("SUNDIAL_URL is not set: these tests need a running API (make test-sdk starts one)")


def need_long_lease_api(case: unittest.TestCase) -> None:
    if not LONG_LEASE_URL:
        case.skipTest("SUNDIAL_LONG_LEASE_URL is not set: this test needs an API with 5 s leases "
                      "(make test-sdk starts one)")


def client(**options: Any) -> Client:
    return Client(URL, api_key=API_KEY, **options)


def queue_name(prefix: str) -> str:
    return f"py-{prefix}-{secrets.token_hex(4)}"


T = TypeVar("T")


def eventually(what: str, cond: Callable[[], T], timeout: float = 20.0, every: float = 0.02) -> T:
    """Calls cond until it returns something true, and returns that; fails
    the test naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


@contextmanager
def running(worker: Worker) -> Iterator[Worker]:
    """Runs the worker in a thread for the block, then stops it."""
    t = threading.Thread(target=worker.run, kwargs={"install_signal_handlers": False}, daemon=True)
    t.start()
    try:
        yield worker
    finally:
        worker.stop()
        t.join(worker.shutdown_timeout + 5)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


class ScriptedServer:
    """A local HTTP server that answers each request with the next of a
    list of (status, headers, body) and records the requests."""

    def __init__(self, answers: List[Tuple[int, Dict[str, str], object]]) -> None:
        self.answers = list(answers)
        self.requests: List[Tuple[str, str, float]] = []
        self.headers: List[Dict[str, str]] = []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _answer(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                outer.requests.append((self.command, self.path, time.monotonic()))
                outer.headers.append(dict(self.headers.items()))
                status, headers, body = outer.answers.pop(0) if outer.answers else (500, {}, None)
                if status == 0:  # break the connection without an answer
                    self.close_connection = True
                    return
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _answer

        self.httpd = _Server(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Proxy:
    """Forwards requests to the API; ``drop(method, path)`` returning True
    breaks that request's connection without forwarding it (with
    ``after_forwarding``: after forwarding it, before the answer).
    ``answer(method, path)``, when given, runs first: a status it returns
    is the answer, the request not forwarded (it may block to hold the
    request open); None forwards it. ``seen`` counts the requests by the
    last segment of their path (claim, heartbeat, complete, fail...)."""

    def __init__(self, target: str, drop: Callable[[str, str], bool], after_forwarding: bool = False,
                 answer: Optional[Callable[[str, str], Optional[int]]] = None) -> None:
        parts = urllib.parse.urlsplit(target)
        self.seen: Dict[str, int] = {}
        self.dropped: List[str] = []
        lock = threading.Lock()
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _forward(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                kind = self.path.split("?")[0].rstrip("/").rsplit("/", 1)[-1]
                with lock:
                    outer.seen[kind] = outer.seen.get(kind, 0) + 1
                    dropping = drop(self.command, self.path)
                    if dropping:
                        outer.dropped.append(self.path)
                if dropping and not after_forwarding:
                    self.close_connection = True
                    return
                status = answer(self.command, self.path) if answer else None
                if status is not None:
                    self._answer(status)
                    return
                conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=120)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                    conn.request(self.command, self.path, body=body, headers=headers)
                    res = conn.getresponse()
                    data = res.read()
                finally:
                    conn.close()
                if dropping:
                    self.close_connection = True
                    return
                self.send_response(res.status)
                for k, v in res.getheaders():
                    if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _answer(self, status: int) -> None:
                data = json.dumps({"error": {"code": "unavailable", "message": "proxy"}}).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up on a held request
                    self.close_connection = True

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _forward

        self.httpd = _Server(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

