"""The client: jobs, queues, schedules and limits over the REST API
(docs/api.md). Answers are the API's JSON objects as dicts."""

import json
import os
import time
import urllib.parse
from datetime import datetime, timezone
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union, cast

from ._transport import Query, Transport
from .encryption import Keyring, seal_spec
from .errors import WaitTimeout

JSON = Dict[str, Any]
"""A JSON object as the API sends it (a job, a queue's counts, a schedule...)."""

FINAL_STATES = frozenset({"succeeded", "dead", "cancelled"})
"""The states a job does not leave on its own."""

DEFAULT_URL = "http://127.0.0.1:8080"


def _seg(value: str) -> str:
    """A path segment, escaped."""
    return urllib.parse.quote(value, safe="")


Time = Union[str, datetime]
"""A time the API takes: an RFC 3339 string, or a datetime (one without a
time zone is taken as UTC)."""


def _rfc3339(value: Time) -> str:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
    return value


def _payload_query(payload: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """``{"field": value}`` as the history search's ``payload.<field>=<value>``
    parameters (a top-level field's value, compared as a string)."""
    return {f"payload.{k}": v if isinstance(v, str) else json.dumps(v) for k, v in (payload or {}).items()}


class Client:
    """A client of the Sundial API.

    Args:
        url: the API's base URL; default ``$SUNDIAL_URL`` or
            ``http://127.0.0.1:8080``.
        api_key: sent as a Bearer token; default ``$SUNDIAL_API_KEY``.
        timeout: seconds to wait for one answer.
        max_retries: tries after a 429 or 503 (waiting ``Retry-After`` when
            the API sends it) and, for calls safe to repeat, after a broken
            connection.
        keyring: a :class:`sundial.Keyring`: every payload submitted is
            encrypted under its primary key (batch callbacks' payloads stay
            in the clear: the API adds the batch id to them), and
            :meth:`decrypt` reads encrypted jobs (docs/payloads.md,
            "Encryption"). Needs the ``cryptography`` package.

    Every error answer raises a subclass of :class:`sundial.ApiError`.
    """

    def __init__(
        self,
        url: Optional[str] = None,
        api_key: Optional[str] = None,
        timeout: float = 30.0,
        max_retries: int = 4,
        backoff: float = 0.2,
        max_backoff: float = 30.0,
        keyring: Optional[Keyring] = None,
    ) -> None:
        self.keyring = keyring
        self.transport = Transport(
            url or os.environ.get("SUNDIAL_URL") or DEFAULT_URL,
            api_key if api_key is not None else os.environ.get("SUNDIAL_API_KEY"),
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
            max_backoff=max_backoff,
        )

    @property
    def url(self) -> str:
        return self.transport.url

    def _json(self, method: str, path: str, body: Any = None, *, query: Optional[Query] = None,
              idempotent: Optional[bool] = None) -> JSON:
        """One call whose answer is a JSON object (an empty one for 204)."""
        res = self.transport.request(method, path, body, query=query, idempotent=idempotent)
        return cast(JSON, res.body) if res.body is not None else {}

    # Jobs

    def submit(
        self,
        type: str,
        payload: Any = None,
        *,
        queue: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        start_by: Optional[Time] = None,
        expires_in_seconds: Optional[float] = None,
        deadline: Optional[Time] = None,
        deadline_in_seconds: Optional[float] = None,
        debounce: Optional[Mapping[str, Any]] = None,
        sequence: Union[str, Mapping[str, Any], None] = None,
        tags: Optional[Sequence[str]] = None,
        **fields: Any,
    ) -> JSON:
        """Submits one job and returns it (201 new; with an idempotency key
        seen in the queue within 24 h, the earlier job). Other fields of the
        API's job spec as keywords: ``priority``, ``max_attempts``,
        ``timeout_seconds``, ``backoff``, ``run_at``, ``delay_seconds``,
        ``depends_on``, ``group``, ``traceparent``.

        The job's options (docs/api.md):

        - ``start_by`` (a datetime or RFC 3339 time) or ``expires_in_seconds``:
          a job not started by then ends ``dead`` ("expired: ...").
        - ``deadline`` or ``deadline_in_seconds``: no attempt starts after it,
          a running one is stopped at it, no retry past it.
        - ``debounce``: ``{"key", "window_seconds", "mode": "replace" |
          "extend", "max_wait_seconds"}``: submits of the key within the
          window update one pending job; the answer is that job, with
          ``"debounced": True`` when it was an earlier one.
        - ``sequence``: a key (or ``{"key", "on_failure": "continue" |
          "cancel"}``): the queue's jobs of one key run one at a time, in
          submit order.
        - ``tags``: up to 10 short tags, for the filters of the lists, the
          dead letters, bulk actions and the history search.

        A submit with an idempotency key is safe to repeat, so it is also
        sent again after a broken connection."""
        fields = dict(fields, **job_options(start_by=start_by, expires_in_seconds=expires_in_seconds,
                                            deadline=deadline, deadline_in_seconds=deadline_in_seconds,
                                            debounce=debounce, sequence=sequence, tags=tags))
        spec = seal_spec(self.keyring, self._spec(type, payload, queue, idempotency_key, fields))
        return self._json("POST", "/v1/jobs", spec, idempotent=idempotency_key is not None)

    def submit_many(self, jobs: Sequence[Mapping[str, Any]]) -> List[JSON]:
        """Submits up to 1000 job specs (dicts of the API's fields, all in one
        queue) at once, all or nothing; ``"#n"`` in ``depends_on`` names job
        n of the batch. Returns the jobs in order (a duplicate idempotency
        key answers the earlier job in its place)."""
        specs = [seal_spec(self.keyring, j) for j in jobs]
        safe = all(s.get("idempotency_key") for s in specs)
        return cast(List[JSON], self._json("POST", "/v1/jobs/batch", {"jobs": specs}, idempotent=safe)["jobs"])

    def submit_workflow(self, steps: Sequence[Mapping[str, Any]], id: Optional[str] = None) -> JSON:
        """Submits a workflow (docs/workflows.md): a DAG of named jobs in any
        queues, each step a dict ``{"name", "job": {job spec}, "after": [names]}``,
        checked whole before anything is stored (:class:`InvalidArgument`
        naming ``steps[i].after[j]``, ``steps[i].job.x``…), then stored in
        dependency order. Returns ``{"id", "steps": {name: job}}``. With an
        ``id`` it is safe to repeat (each step's idempotency key is
        ``wf:<id>:<name>``: a repeat stores only what is missing), so it is
        then also sent again after a broken connection."""
        body: Dict[str, Any] = {"steps": [dict(s, job=seal_spec(self.keyring, s["job"])) if "job" in s else dict(s)
                                          for s in steps]}
        if id is not None:
            body["id"] = id
        return self._json("POST", "/v1/workflows", body, idempotent=id is not None)

    # Batches (docs/workflows.md, "Batches")

    def create_batch(self, jobs: Sequence[Mapping[str, Any]], id: Optional[str] = None,
                     on_success: Optional[Mapping[str, Any]] = None,
                     on_complete: Optional[Mapping[str, Any]] = None, open: bool = False) -> JSON:
        """Submits a batch: jobs (specs, in any queues, without ``depends_on``
        and ``idempotency_key``; up to 10,000 a call) and callbacks, job specs
        submitted once when every member succeeded (``on_success``) or ended
        (``on_complete``); their payload (a dict or none) gets ``"batch"``,
        the batch's id. Sealed unless ``open``. Returns ``{"batch", "job_ids"}``;
        409 :class:`Conflict` when a batch of that id exists."""
        body: Dict[str, Any] = {"jobs": [seal_spec(self.keyring, j) for j in jobs]}
        if id is not None:
            body["id"] = id
        if on_success is not None:
            body["on_success"] = dict(on_success)
        if on_complete is not None:
            body["on_complete"] = dict(on_complete)
        if open:
            body["open"] = True
        return self._json("POST", "/v1/batches", body)

    def add_to_batch(self, batch_id: str, jobs: Sequence[Mapping[str, Any]], seal: bool = False) -> JSON:
        """Adds jobs to an open batch, and seals it with ``seal`` (409 once
        sealed). Returns ``{"batch", "job_ids"}``."""
        body: Dict[str, Any] = {"jobs": [seal_spec(self.keyring, j) for j in jobs]}
        if seal:
            body["seal"] = True
        return self._json("POST", f"/v1/batches/{_seg(batch_id)}/jobs", body)

    def batch(self, batch_id: str) -> JSON:
        """A batch: ``total``, ``sealed``, ``counts`` (pending, succeeded,
        dead, cancelled), each callback's ``state`` and ``job_id``."""
        return self._json("GET", f"/v1/batches/{_seg(batch_id)}")

    def batch_jobs(self, batch_id: str, limit: Optional[int] = None, cursor: Optional[str] = None) -> JSON:
        """One page of a batch's members, in the order added:
        ``{"jobs": [...], "next_cursor": ""}``."""
        return self._json("GET", f"/v1/batches/{_seg(batch_id)}/jobs", query={"limit": limit, "cursor": cursor})

    def batch_results(self, batch_id: str) -> Iterator[JSON]:
        """Every member's ``{"id", "queue", "state", "result", "last_error"}``,
        in the order added, page after page (fan-in)."""
        cursor: Optional[str] = None
        while True:
            page = self._json("GET", f"/v1/batches/{_seg(batch_id)}/results", query={"limit": 500, "cursor": cursor})
            yield from page["results"]
            cursor = page.get("next_cursor") or None
            if not cursor:
                return

    def cancel_batch(self, batch_id: str) -> int:
        """Seals the batch and cancels its members that have not ended;
        returns how many it cancelled."""
        return cast(int, self._json("POST", f"/v1/batches/{_seg(batch_id)}/cancel", idempotent=True)["cancelled"])

    def retry_batch(self, batch_id: str) -> int:
        """Queues the batch's dead and cancelled members again; returns how
        many."""
        return cast(int, self._json("POST", f"/v1/batches/{_seg(batch_id)}/retry", idempotent=True)["retried"])

    def decrypt(self, job: Mapping[str, Any]) -> JSON:
        """A copy of ``job`` (as :meth:`get` or :meth:`wait` return it) with
        its encrypted payload, result and last error decrypted with the
        client's keyring (docs/payloads.md, "Encryption"). Raises
        :class:`sundial.MissingKey` naming a key id the keyring lacks."""
        if self.keyring is None:
            raise ValueError("this client has no keyring (Client(keyring=Keyring.from_env()))")
        return self.keyring.decrypt_job(job)

    def get(self, job_id: str) -> JSON:
        """The job as it is now (404 :class:`NotFound` when unknown)."""
        return self._json("GET", f"/v1/jobs/{_seg(job_id)}")

    def wait(self, job_id: str, timeout: float = 60.0, poll: float = 0.05, max_poll: float = 1.0) -> JSON:
        """Reads the job until it is in a final state (succeeded, dead,
        cancelled) and returns it; raises :class:`WaitTimeout` (a
        ``TimeoutError``) after ``timeout`` seconds. Polls start every
        ``poll`` seconds and slow down to ``max_poll``."""
        deadline = time.monotonic() + timeout
        job: Optional[JSON] = None
        while True:
            job = self.get(job_id)
            if job.get("state") in FINAL_STATES:
                return job
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeout(job_id, timeout, job)
            time.sleep(min(poll, left))
            poll = min(max_poll, poll * 1.5)

    def logs_page(self, job_id: str, after: Optional[int] = None, limit: Optional[int] = None) -> JSON:
        """One page of the job's log lines (``ctx.log`` in a handler), oldest
        first, those after the line numbered ``after``: ``{"lines": [{"seq",
        "at", "attempt", "level", "message", "fields"}], "dropped": n,
        "next_after": seq}``. A job keeps its last lines up to a cap;
        ``dropped`` counts those it let go."""
        return self._json("GET", f"/v1/jobs/{_seg(job_id)}/logs", query={"after": after, "limit": limit})

    def logs(self, job_id: str, after: int = 0) -> List[JSON]:
        """Every log line of the job kept now (after ``after``), page after page."""
        out: List[JSON] = []
        while True:
            page = self.logs_page(job_id, after=after or None, limit=1000)
            lines = page.get("lines") or []
            out.extend(lines)
            nxt = int(page.get("next_after") or 0)
            if not lines or nxt <= after:
                return out
            after = nxt

    def cancel(self, job_id: str) -> JSON:
        """Cancels a job that has not ended (an active one is stopped by its
        worker); 409 :class:`Conflict` in a final state."""
        return self._json("POST", f"/v1/jobs/{_seg(job_id)}/cancel")

    def retry(self, job_id: str) -> JSON:
        """Queues a dead or cancelled job again, attempt 0; else 409."""
        return self._json("POST", f"/v1/jobs/{_seg(job_id)}/retry")

    # Signals to durable jobs (docs/durable.md)

    def signal(self, job_id: str, name: str, value: Any = None, idempotency_key: Optional[str] = None) -> JSON:
        """Sends the signal ``name`` (a JSON value) to a durable job, for its
        ``ctx.wait_signal(name)``: a job parked waiting for it runs at once;
        one sent before the wait began is kept. Returns ``{"status":
        "delivered" | "duplicate", "job_id"}``. A job takes one signal of
        each name: sent again with the same ``idempotency_key`` it answers
        ``duplicate`` (so it is then also sent again after a broken
        connection), otherwise 409 :class:`Conflict`; 409 too for a job that
        ended, 404 :class:`NotFound` for an unknown one."""
        body: JSON = {}
        if value is not None:
            body["value"] = value
        if idempotency_key is not None:
            body["idempotency_key"] = idempotency_key
        return self._json("POST", f"/v1/jobs/{_seg(job_id)}/signals/{_seg(name)}", body,
                          idempotent=idempotency_key is not None)

    def signal_key(self, queue: str, key: str, name: str, value: Any = None,
                   idempotency_key: Optional[str] = None) -> JSON:
        """Sends the signal ``name`` to the job of ``queue`` that waits (or
        waited) with ``key`` (``ctx.wait_signal(name, key=...)``): an order
        number, say. Returns ``{"status": "delivered" | "duplicate",
        "job_id"}``, or ``{"status": "pending"}`` (202) when no job chose the
        key yet: the signal is kept for the one that will. 409
        :class:`Conflict` as for :meth:`signal`."""
        body: JSON = {"queue": queue, "key": key, "name": name}
        if value is not None:
            body["value"] = value
        if idempotency_key is not None:
            body["idempotency_key"] = idempotency_key
        return self._json("POST", "/v1/signals", body, idempotent=idempotency_key is not None)

    def events_page(self, job_id: str, limit: Optional[int] = None, cursor: Optional[str] = None) -> JSON:
        """One page of the job's events from the history store, oldest first:
        ``{"events": [...], "next_cursor": ""}`` (503 without a history store)."""
        return self._json("GET", f"/v1/jobs/{_seg(job_id)}/events",
                                      query={"limit": limit, "cursor": cursor})

    def events(self, job_id: str) -> List[JSON]:
        """Every event of the job, oldest first, page after page."""
        out: List[JSON] = []
        cursor: Optional[str] = None
        while True:
            page = self.events_page(job_id, limit=500, cursor=cursor)
            out.extend(page["events"])
            cursor = page.get("next_cursor") or None
            if not cursor:
                return out

    def search(
        self,
        *,
        queue: Optional[str] = None,
        type: Optional[str] = None,
        group: Optional[str] = None,
        state: Optional[str] = None,
        created_from: Optional[str] = None,
        created_to: Optional[str] = None,
        tag: Optional[str] = None,
        payload: Optional[Mapping[str, Any]] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> JSON:
        """One page of the history search, newest first:
        ``{"jobs": [...], "next_cursor": ""}``. ``tag`` keeps the jobs with
        that tag; ``payload`` (``{"field": value}``) those whose payload's
        top-level field has that value (compared as a string). Needs the
        history store (503 :class:`Unavailable` without one)."""
        query: Dict[str, Any] = {"queue": queue, "type": type, "group": group, "state": state,
                                 "from": created_from, "to": created_to, "tag": tag, "limit": limit,
                                 "cursor": cursor}
        query.update(_payload_query(payload))
        return self._json("GET", "/v1/jobs", query=query)

    def search_all(self, **filters: Any) -> Iterator[JSON]:
        """Every job the search finds, page after page (the keywords of
        :meth:`search`, without ``cursor``)."""
        cursor: Optional[str] = None
        while True:
            page = self.search(cursor=cursor, **filters)
            yield from page["jobs"]
            cursor = page.get("next_cursor") or None
            if not cursor:
                return

    # Audit log and session

    def session(self) -> JSON:
        """Who this client is to the API: its actor (an API key by id),
        scopes and the queue patterns it is limited to (``"*"``: every
        queue)."""
        return self._json("GET", "/v1/session")

    def audit(self, *, actor: Optional[str] = None, action: Optional[str] = None,
              target: Optional[str] = None, since: Optional[str] = None, until: Optional[str] = None,
              limit: Optional[int] = None, cursor: Optional[str] = None) -> JSON:
        """One page of the audit log, newest first:
        ``{"records": [...], "next_cursor": ""}`` (admin scope; 503
        :class:`Unavailable` without a history store)."""
        return self._json("GET", "/v1/audit", query={"actor": actor, "action": action, "target": target,
                                                      "since": since, "until": until, "limit": limit,
                                                      "cursor": cursor})

    # Queues

    def queues(self) -> List[JSON]:
        """Every known queue's counts, sorted by name."""
        return cast(List[JSON], self._json("GET", "/v1/queues")["queues"])

    def queue(self, name: str) -> JSON:
        """One queue's counts (404 when unknown)."""
        return self._json("GET", f"/v1/queues/{_seg(name)}")

    def pause(self, name: str) -> JSON:
        """Pauses a queue (creating it when unknown); answers its counts."""
        return self._json("POST", f"/v1/queues/{_seg(name)}/pause", idempotent=True)

    def resume(self, name: str) -> JSON:
        """Resumes a paused queue (404 when unknown); answers its counts."""
        return self._json("POST", f"/v1/queues/{_seg(name)}/resume", idempotent=True)

    def dead(self, name: str, limit: Optional[int] = None, cursor: Optional[str] = None,
             tag: Optional[str] = None) -> JSON:
        """One page of a queue's dead jobs, newest first (only those with
        ``tag`` when given)."""
        return self._json("GET", f"/v1/queues/{_seg(name)}/dead",
                          query={"limit": limit, "cursor": cursor, "tag": tag})

    def retry_dead(self, name: str, ids: Optional[Sequence[str]] = None) -> int:
        """Queues a queue's dead jobs again (those named, or all); returns
        how many."""
        body = {"ids": list(ids)} if ids is not None else None
        return cast(int, self._json("POST", f"/v1/queues/{_seg(name)}/dead/retry", body)["retried"])

    def purge_dead(self, name: str, ids: Optional[Sequence[str]] = None) -> int:
        """Deletes a queue's dead jobs (those named, or all); returns how many."""
        body = {"ids": list(ids)} if ids is not None else None
        return cast(int, self._json("DELETE", f"/v1/queues/{_seg(name)}/dead", body)["deleted"])

    def queue_jobs(self, name: str, *, state: Optional[str] = None, type: Optional[str] = None,
                   priority: Optional[str] = None, tag: Optional[str] = None, limit: Optional[int] = None,
                   cursor: Optional[str] = None) -> JSON:
        """One page of a queue's live jobs in one state (queued by default),
        read from Redis: ``{"jobs", "next_cursor"}``. With ``type``,
        ``priority`` or ``tag`` a page may be short, even empty, while
        ``next_cursor`` says there is more: follow it."""
        return self._json("GET", f"/v1/queues/{_seg(name)}/jobs",
                          query={"state": state, "type": type, "priority": priority, "tag": tag, "limit": limit,
                                 "cursor": cursor})

    def bulk(self, name: str, action: str, *, ids: Optional[Sequence[str]] = None,
             filter: Optional[Mapping[str, Any]] = None, to_queue: Optional[str] = None) -> JSON:
        """Retries, cancels, deletes or moves a selection of a queue's jobs
        on the server: the jobs named by ``ids``, or those ``filter``
        matches (``state``, ``type``, ``tag``, ``error_contains``, ``since``).
        Returns the counts (``matched``, ``count``, ``scanned``). Safe to
        send again after an interruption (docs/api.md, "Bulk actions")."""
        body: Dict[str, Any] = {"action": action}
        if ids is not None:
            body["ids"] = list(ids)
        if filter is not None:
            body["filter"] = dict(filter)
        if to_queue is not None:
            body["to_queue"] = to_queue
        return self._json("POST", f"/v1/queues/{_seg(name)}/jobs/bulk", body, idempotent=True)

    # Schedules

    def put_schedule(self, schedule_id: str, schedule: Mapping[str, Any]) -> JSON:
        """Creates or replaces a schedule (``cron`` or ``every_seconds``,
        ``job``, ``timezone``, ``enabled``, ``misfire``); answers it."""
        return self._json("PUT", f"/v1/schedules/{_seg(schedule_id)}", dict(schedule))

    def get_schedule(self, schedule_id: str) -> JSON:
        return self._json("GET", f"/v1/schedules/{_seg(schedule_id)}")

    def schedules(self, queue: Optional[str] = None) -> List[JSON]:
        """Every schedule, ordered by id (only those whose jobs go to
        ``queue`` when given)."""
        return cast(List[JSON], self._json("GET", "/v1/schedules", query={"queue": queue})["schedules"])

    def patch_schedule(self, schedule_id: str, patch: Mapping[str, Any]) -> JSON:
        """Changes a schedule with a JSON merge patch (``None`` removes a member)."""
        return self._json("PATCH", f"/v1/schedules/{_seg(schedule_id)}", dict(patch))

    def delete_schedule(self, schedule_id: str) -> None:
        self._json("DELETE", f"/v1/schedules/{_seg(schedule_id)}")

    def trigger_schedule(self, schedule_id: str) -> JSON:
        """Submits the schedule's job now; answers the job."""
        return self._json("POST", f"/v1/schedules/{_seg(schedule_id)}/trigger")

    def preview_schedule(self, cron: Optional[str] = None, timezone: Optional[str] = None,
                         every_seconds: Optional[int] = None) -> List[str]:
        """The next five fire times of a timing, without storing anything."""
        body: JSON = {}
        if cron is not None:
            body["cron"] = cron
        if timezone is not None:
            body["timezone"] = timezone
        if every_seconds is not None:
            body["every_seconds"] = every_seconds
        return cast(List[str], self._json("POST", "/v1/schedules/preview", body, idempotent=True)["upcoming"])

    # Limits

    def set_limit(self, queue: str, name: str, limit: Mapping[str, Any]) -> JSON:
        """Creates or replaces a limit of a queue (``concurrency`` and/or
        ``rate`` ``{"limit", "period_seconds"}``, optional ``types`` and
        ``key``); answers it with ``active`` and ``throttled``."""
        return self._json("PUT", f"/v1/queues/{_seg(queue)}/limits/{_seg(name)}", dict(limit))

    def get_limit(self, queue: str, name: str) -> JSON:
        return self._json("GET", f"/v1/queues/{_seg(queue)}/limits/{_seg(name)}")

    def limits(self, queue: str) -> List[JSON]:
        return cast(List[JSON], self._json("GET", f"/v1/queues/{_seg(queue)}/limits")["limits"])

    def delete_limit(self, queue: str, name: str) -> None:
        self._json("DELETE", f"/v1/queues/{_seg(queue)}/limits/{_seg(name)}")

    # Workers

    def workers(self) -> List[JSON]:
        """The live workers, Go and HTTP."""
        return cast(List[JSON], self._json("GET", "/v1/workers")["workers"])

    @staticmethod
    def _spec(type: str, payload: Any, queue: Optional[str], idempotency_key: Optional[str],
              fields: Mapping[str, Any]) -> JSON:
        spec: JSON = {"type": type}
        if payload is not None:
            spec["payload"] = payload
        if queue is not None:
            spec["queue"] = queue
        if idempotency_key is not None:
            spec["idempotency_key"] = idempotency_key
        spec.update({k: v for k, v in fields.items() if v is not None})
        return spec


def job_options(
    *,
    start_by: Optional[Time] = None,
    expires_in_seconds: Optional[float] = None,
    deadline: Optional[Time] = None,
    deadline_in_seconds: Optional[float] = None,
    debounce: Optional[Mapping[str, Any]] = None,
    sequence: Union[str, Mapping[str, Any], None] = None,
    tags: Optional[Sequence[str]] = None,
) -> JSON:
    """The job options of :meth:`Client.submit` as the API's spec fields, for
    :meth:`Client.submit_many`, batches and workflows: times as RFC 3339, a
    sequence key as ``{"key": key}``; unset ones left out."""
    out: JSON = {}
    if start_by is not None:
        out["start_by"] = _rfc3339(start_by)
    if expires_in_seconds is not None:
        out["expires_in_seconds"] = expires_in_seconds
    if deadline is not None:
        out["deadline"] = _rfc3339(deadline)
    if deadline_in_seconds is not None:
        out["deadline_in_seconds"] = deadline_in_seconds
    if debounce is not None:
        out["debounce"] = dict(debounce)
    if sequence is not None:
        out["sequence"] = {"key": sequence} if isinstance(sequence, str) else dict(sequence)
    if tags is not None:
        out["tags"] = list(tags)
    return out
