#!/usr/bin/env python3
"""A Sundial worker in Python, standard library only (docs/workers.md): long-poll
claims, lease renewal, progress, outcomes, for sundial.echo, .sleep and .fail.
Env: SUNDIAL_URL, SUNDIAL_API_KEY (work scope), SUNDIAL_QUEUES, SUNDIAL_WORKER_ID.
It shows the protocol; for real workers use the SDK in sdk/python (docs/sdks.md):
concurrency, SIGTERM, complete retried after a network error."""
import json, os, socket, threading, time, urllib.error, urllib.request

URL = os.environ.get("SUNDIAL_URL", "http://127.0.0.1:8080").rstrip("/")
KEY = os.environ.get("SUNDIAL_API_KEY", "")
QUEUES = os.environ.get("SUNDIAL_QUEUES", "default").split(",")
WORKER = os.environ.get("SUNDIAL_WORKER_ID") or f"py-{socket.gethostname()}-{os.getpid()}"


class LeaseLost(Exception):  # reclaimed or cancelled: stop the job, report nothing
    pass


def call(path, body):
    headers = {"Content-Type": "application/json"}
    if KEY:
        headers["Authorization"] = "Bearer " + KEY
    req = urllib.request.Request(URL + path, json.dumps(body).encode(), headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=90) as res:
            return json.load(res)
    except urllib.error.HTTPError as e:
        if e.code == 409:
            raise LeaseLost(json.load(e)["error"]["message"]) from None
        raise


def echo(job, progress):
    return job.get("payload")


def sleep(job, progress):
    ms = (job.get("payload") or {}).get("ms", 250)
    for step in range(1, 5):
        time.sleep(ms / 4000)
        progress(25 * step, f"slept {ms * step // 4} of {ms} ms")
    return {"slept_ms": ms}


def fail(job, progress):
    p = {"times": 1, "message": "sundial.fail: planned failure", **(job.get("payload") or {})}
    if job["attempt"] <= p["times"]:
        raise RuntimeError(p["message"])
    return {"failed_attempts": p["times"]}


HANDLERS = {"sundial.echo": echo, "sundial.sleep": sleep, "sundial.fail": fail}


def run(job, lease):
    path, token = f"/v1/jobs/{job['id']}", lease["token"]
    done, lost = threading.Event(), threading.Event()

    def renew():  # every third of the lease, until the job ends
        while not done.wait(lease["ttl_seconds"] / 3):
            try:
                call(path + "/heartbeat", {"token": token, "worker_id": WORKER})
            except LeaseLost:
                return lost.set()
            except OSError:
                pass  # the API is briefly away: the next beat retries

    def progress(percent, message):
        if lost.is_set():
            raise LeaseLost("lease lost")
        call(path + "/heartbeat", {"token": token, "progress": percent, "message": message})

    threading.Thread(target=renew, daemon=True).start()
    try:
        result = HANDLERS[job["type"]](job, progress)
        call(path + "/complete", {"token": token, "result": result, "worker_id": WORKER})
    except LeaseLost as e:
        print(f"{job['id']}: {e}", flush=True)
    except Exception as e:  # the attempt failed: retried with backoff by Sundial
        try:
            call(path + "/fail", {"token": token, "error": str(e), "worker_id": WORKER})
        except LeaseLost:
            pass
    finally:
        done.set()

def main():
    print(f"worker {WORKER} serving {QUEUES} at {URL}", flush=True)
    while True:
        try:
            claimed = call("/v1/claim", {"worker_id": WORKER, "queues": QUEUES,
                                         "types": list(HANDLERS), "wait_seconds": 20})
            for c in claimed["jobs"]:
                run(c["job"], c["lease"])
        except (OSError, ValueError) as e:  # API unreachable or restarting
            print(f"claim failed ({e}); retrying in 1 s", flush=True)
            time.sleep(1)

if __name__ == "__main__":
    main()
