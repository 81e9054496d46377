"""A worker process for the shutdown test: runs "slow" jobs that sleep
payload["seconds"] (stopping early when cancelled) until SIGTERM.
Env: SUNDIAL_URL, SUNDIAL_API_KEY, SUNDIAL_QUEUES, SHUTDOWN_TIMEOUT,
CONCURRENCY (default 2)."""

import logging
import os
import sys

from sundial import JobContext, Worker


def slow(ctx: JobContext) -> dict:
    print(f"started {ctx.id}", flush=True)
    stopped = ctx.cancelled.wait(float(ctx.payload["seconds"]))
    print(f"{'cancelled' if stopped else 'finished'} {ctx.id}", flush=True)
    return {"slept": ctx.payload["seconds"]}


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stdout)
    worker = Worker(concurrency=int(os.environ.get("CONCURRENCY", "2")), wait_seconds=5, shutdown_timeout=float(os.environ["SHUTDOWN_TIMEOUT"]))
    worker.handle("slow", slow)
    print("ready", flush=True)
    worker.run()
    print("exited", flush=True)
