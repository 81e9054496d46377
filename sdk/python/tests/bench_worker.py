"""Throughput of the worker over HTTP: submits N no-op jobs to a fresh
queue, then runs a Worker at each concurrency until all have succeeded, and
prints jobs/s. Not part of the suite (unittest does not discover it).

    SUNDIAL_URL=http://127.0.0.1:8080 SUNDIAL_API_KEY=... \\
        python bench_worker.py [jobs] [concurrency ...]

internal/sdktest's TestSDKThroughput (SUNDIAL_SDK_BENCH=1) runs it against
a real API, poller and redis-server on loopback."""

import os
import sys
import threading
import time

from sundial import Client, Worker


def bench(c: Client, n: int, concurrency: int) -> float:
    q = f"py-bench-{concurrency}-{os.getpid()}-{int(time.time())}"
    for start in range(0, n, 1000):
        c.submit_many([{"queue": q, "type": "noop"} for _ in range(start, min(n, start + 1000))])
    w = Worker([q], url=c.url, api_key=os.environ.get("SUNDIAL_API_KEY"), concurrency=concurrency,
               wait_seconds=1, shutdown_timeout=5)
    w.handle("noop", lambda ctx: None)
    t = threading.Thread(target=w.run, kwargs={"install_signal_handlers": False}, daemon=True)
    began = time.monotonic()
    t.start()
    while c.queue(q)["succeeded_total"] < n:
        time.sleep(0.02)
    took = time.monotonic() - began
    w.stop()
    t.join(10)
    return n / took


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 4000
    levels = [int(a) for a in sys.argv[2:]] or [8, 64]
    c = Client(os.environ.get("SUNDIAL_URL"), api_key=os.environ.get("SUNDIAL_API_KEY"))
    for conc in levels:
        print(f"python worker: {n} no-op jobs at concurrency {conc}: {bench(c, n, conc):.0f} jobs/s", flush=True)


if __name__ == "__main__":
    main()
