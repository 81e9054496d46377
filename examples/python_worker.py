#!/usr/bin/env python3
"""A Sundial worker on the Python SDK (sdk/python, docs/sdk-python.md): runs the
built-in test types sundial.echo, sundial.sleep (with progress) and sundial.fail.
Env: SUNDIAL_URL, SUNDIAL_API_KEY (work scope), SUNDIAL_QUEUES, SUNDIAL_WORKER_ID.
Uses the installed package (pip install ./sdk/python), else the repository's copy:
the SDK is standard library only, so plain python3 runs this file."""
import logging
import os
import sys

try:
    import sundial
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sdk", "python"))
    import sundial

worker = sundial.Worker(concurrency=4)


@worker.handler("sundial.echo")
def echo(ctx: sundial.JobContext):
    return ctx.payload


@worker.handler("sundial.sleep")
def sleep(ctx: sundial.JobContext):
    ms = (ctx.payload or {}).get("ms", 250)
    for step in range(1, 5):
        if ctx.cancelled.wait(ms / 4000):  # the lease is gone or we are shutting down
            return None
        ctx.progress(25 * step, f"slept {ms * step // 4} of {ms} ms")
    return {"slept_ms": ms}


@worker.handler("sundial.fail")
def fail(ctx: sundial.JobContext):
    p = {"times": 1, "message": "sundial.fail: planned failure", **(ctx.payload or {})}
    if ctx.attempt <= p["times"]:
        raise RuntimeError(p["message"])
    return {"failed_attempts": p["times"]}


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    worker.run()  # until SIGTERM or SIGINT: running jobs finish, the rest are given back
