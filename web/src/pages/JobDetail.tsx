// Job detail: every field, payload, result and error, its dependency graph
// both ways, and the event timeline, following the stream live; for a
// durable job, what it waits for, its recorded steps, its signals and a
// form to send it one.

import { useEffect, useMemo, useState } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { Link } from "wouter";
import { api, describeError } from "../api/client";
import { finalStates, type JobEvent, type StreamEvent } from "../api/types";
import { useLive } from "../live/store";
import { Confirm, ErrorBanner, JsonBlock, Pre, StateBadge } from "../components/ui";
import { DependencyGraph } from "../components/DependencyGraph";
import { DurableWait, SignalForm, SignalTable, StepTimeline } from "../components/Durable";
import { JobLogs } from "../components/JobLogs";
import { ago, when } from "../lib/format";

/**
 * mergeTimeline joins the recorded history with events the stream showed,
 * oldest first, without repeats. A live event matches one recorded event of
 * the same type, time and attempt (two steps recorded in one millisecond are
 * two events); the history keeps no message, so a matched recorded event
 * takes the live one's.
 */
export function mergeTimeline(recorded: JobEvent[], live: StreamEvent[]): JobEvent[] {
  const key = (type: string, at: string, attempt: number) => `${type}|${Date.parse(at)}|${attempt}`;
  const out = recorded.map((e) => ({ ...e }));
  const unmatched = new Map<string, number[]>();
  out.forEach((e, i) => {
    const k = key(e.type, e.at, e.attempt);
    unmatched.set(k, [...(unmatched.get(k) ?? []), i]);
  });
  for (const e of live) {
    const same = unmatched.get(key(e.event, e.at, e.attempt));
    const i = same?.shift();
    if (i !== undefined) {
      if (!out[i].message && e.message) out[i].message = e.message;
      continue;
    }
    out.push({ type: e.event, at: e.at, state: e.state, attempt: e.attempt, worker_id: e.worker_id, error: e.error, ...(e.message ? { message: e.message } : {}) });
  }
  return out.sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
}

/**
 * eventDetail says what a step, parked or signal event means: a step's
 * message "1 charge ok" reads "step 1 charge: ok"; a parked event names
 * what the job waits for in its error field ("sleep", "signal:shipped").
 */
export function eventDetail(e: Pick<JobEvent, "type" | "message" | "error">): string {
  const m = e.message ?? "";
  if (e.type === "parked") {
    const what = m || e.error;
    if (!what) return "";
    if (what === "sleep") return "sleeps";
    if (what.startsWith("signal:sundial.children:")) return "waits for its children";
    return what.startsWith("signal:") ? `waits for signal ${what.slice("signal:".length)}` : `waits for ${what}`;
  }
  if (!m) return "";
  if (e.type === "step") {
    const parts = m.split(" ");
    if (parts.length >= 3) return `step ${parts[0]} ${parts.slice(1, -1).join(" ")}: ${parts[parts.length - 1]}`;
  }
  if (e.type === "signal") return `signal ${m}`;
  return m;
}

/** tagHref is the Jobs page filtered by a tag: the queue's live list in the job's state while it has not ended, else the history search. */
function tagHref(queue: string, state: string | undefined, tag: string): string {
  const p = new URLSearchParams({ queue });
  if (state) p.set("state", state);
  p.set("tag", tag);
  return `/jobs?${p.toString()}`;
}

/** linkJobIds shows a message with the job ids it names (a sequence's job ahead) as links to their pages. */
export function linkJobIds(text: string): React.ReactNode[] {
  const out: React.ReactNode[] = [];
  const re = /\b[0-9A-HJKMNP-TV-Z]{26}\b/g;
  let last = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    out.push(<Link key={m.index} href={`/jobs/${m[0]}`} className="mono">{m[0]}</Link>);
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

export function JobDetail({ id }: { id: string }) {
  const qc = useQueryClient();
  const job = useQuery({ queryKey: ["job", id], queryFn: () => api.getJob(id), retry: false });
  const events = useQuery({ queryKey: ["events", id], queryFn: () => api.jobEvents(id), retry: false });
  const liveEvent = useLive((s) => s.data.jobs.get(id));
  const recent = useLive((s) => s.data.recent);
  const [seen, setSeen] = useState<StreamEvent[]>([]);
  const [confirm, setConfirm] = useState<"cancel" | "retry" | null>(null);

  // New stream events for this job (several may come in one batch: a step,
  // then parked): keep them for the timeline and reread the job.
  const fresh = [...recent.filter((e) => e.job_id === id).reverse(), ...(liveEvent ? [liveEvent] : [])]
    .filter((e, i, all) => !seen.some((x) => x.id === e.id) && all.findIndex((x) => x.id === e.id) === i);
  if (fresh.length > 0) setSeen([...seen, ...fresh]);
  useEffect(() => {
    // A log event adds lines, which the Logs panel reads: the job is unchanged.
    if (!liveEvent || liveEvent.event === "log") return;
    qc.invalidateQueries({ queryKey: ["job", id] });
    const t = setTimeout(() => qc.invalidateQueries({ queryKey: ["events", id] }), 1500);
    return () => clearTimeout(t);
  }, [liveEvent, id, qc]);

  const j = job.data;

  const action = useMutation({
    mutationFn: (a: "cancel" | "retry") => (a === "cancel" ? api.cancelJob(id) : api.retryJob(id)),
    onSuccess: (data) => {
      qc.setQueryData(["job", id], data);
      setConfirm(null);
    },
  });

  // Log lines have their panel: their events would crowd the timeline.
  const timeline = useMemo(() => mergeTimeline(events.data?.events ?? [], seen).filter((e) => e.type !== "log"), [events.data, seen]);

  if (job.error && !j) {
    return (
      <>
        <h1>Job <span className="mono">{id}</span></h1>
        <ErrorBanner error={job.error} />
        <Link href="/jobs">Back to jobs</Link>
      </>
    );
  }
  if (!j) return <p aria-busy="true">Loading…</p>;
  const state = liveEvent && Date.parse(liveEvent.at) >= Date.parse(j.finished_at ?? j.started_at ?? j.created_at) ? liveEvent.state : j.state;
  const final = finalStates.has(state);

  return (
    <>
      <div className="page-head">
        <h1>
          Job <span className="mono small-id">{j.id}</span>
        </h1>
        <span data-testid="job-state"><StateBadge state={state} /></span>
        <span className="spacer" />
        <button type="button" disabled={final} onClick={() => setConfirm("cancel")}>Cancel</button>
        <button type="button" disabled={!(state === "dead" || state === "cancelled")} onClick={() => setConfirm("retry")}>Retry</button>
      </div>
      <ErrorBanner error={action.error} />
      {j.durable?.awaiting && !final ? <DurableWait awaiting={j.durable.awaiting} signalKey={j.durable.signal_key} queue={j.queue} /> : null}
      <div className="detail">
        <section aria-labelledby="fields">
          <h2 id="fields">Fields</h2>
          <dl className="kv">
            <dt>queue</dt><dd><Link href={`/jobs?queue=${j.queue}`}>{j.queue}</Link></dd>
            <dt>type</dt><dd className="mono">{j.type}</dd>
            <dt>priority</dt><dd>{j.priority}</dd>
            {j.group ? (<><dt>group</dt><dd className="mono" data-testid="job-group">{j.group}</dd></>) : null}
            {j.batch ? (<><dt>batch</dt><dd><Link href={`/batches/${j.batch}`} className="mono" data-testid="job-batch">{j.batch}</Link></dd></>) : null}
            {j.held_back && j.held_back.reason !== "limit" ? (
              <>
                <dt>why it waits</dt>
                <dd data-testid="job-held-back" data-reason={j.held_back.reason}>{linkJobIds(j.held_back.message)}</dd>
              </>
            ) : null}
            {j.throttled_by && state === "queued" ? (
              <>
                <dt>held back</dt>
                <dd data-testid="job-throttled-by">
                  waiting for limit <Link href="/queues" className="mono">{j.throttled_by}</Link>
                </dd>
              </>
            ) : null}
            {j.sequence ? (
              <>
                <dt>sequence</dt>
                <dd data-testid="job-sequence">
                  <span className="mono">{j.sequence.key}</span>
                  <span className="muted"> — runs after the queue's earlier jobs of the key{j.sequence.on_failure === "cancel" ? "; cancelled if one of them ends dead or cancelled" : ""}</span>
                </dd>
              </>
            ) : null}
            {j.debounce_key ? (<><dt>debounce key</dt><dd className="mono" data-testid="job-debounce-key">{j.debounce_key}</dd></>) : null}
            {j.tags?.length ? (
              <>
                <dt>tags</dt>
                <dd data-testid="job-tags">
                  {j.tags.map((t) => (
                    <Link key={t} href={tagHref(j.queue, finalStates.has(state) ? undefined : state, t)} className="chip mono tag-chip" title={`Jobs tagged ${t}`}>{t}</Link>
                  ))}
                </dd>
              </>
            ) : null}
            {j.start_by ? (
              <>
                <dt>start by</dt>
                <dd title={j.start_by} data-testid="job-start-by">{when(j.start_by)} ({ago(j.start_by)}){j.started_at ? null : <span className="muted"> — expires unless it starts by then</span>}</dd>
              </>
            ) : null}
            {j.deadline ? (
              <>
                <dt>deadline</dt>
                <dd title={j.deadline} data-testid="job-deadline">{when(j.deadline)} ({ago(j.deadline)})</dd>
              </>
            ) : null}
            <dt>attempts</dt><dd>{j.attempt} of {j.max_attempts}</dd>
            <dt>timeout</dt><dd>{j.timeout_seconds} s</dd>
            <dt>backoff</dt><dd>{j.backoff.base_seconds} s base, {j.backoff.max_seconds} s max</dd>
            <dt>run at</dt><dd title={j.run_at}>{when(j.run_at)} ({ago(j.run_at)})</dd>
            <dt>created</dt><dd title={j.created_at}>{when(j.created_at)}</dd>
            <dt>started</dt><dd title={j.started_at}>{when(j.started_at)}</dd>
            <dt>finished</dt><dd title={j.finished_at}>{when(j.finished_at)}</dd>
            <dt>worker</dt><dd className="mono">{j.worker_id || "–"}</dd>
            {j.progress && state === "active" ? (
              <>
                <dt>progress</dt>
                <dd data-testid="job-progress">
                  <progress max={100} value={j.progress.percent} aria-label="Progress" /> {j.progress.percent}%
                  {j.progress.message ? <span className="muted"> — {j.progress.message}</span> : null}
                </dd>
              </>
            ) : null}
            {j.idempotency_key ? (<><dt>idempotency key</dt><dd className="mono">{j.idempotency_key}</dd></>) : null}
            {j.traceparent ? (
              <>
                <dt>trace</dt>
                <dd className="mono small" data-testid="job-traceparent" title="W3C traceparent: version-trace id-parent id-flags">{j.traceparent}</dd>
              </>
            ) : null}
          </dl>
        </section>
        <section aria-labelledby="data">
          <h2 id="data">Payload</h2>
          <JsonBlock value={j.payload} label="Payload" />
          <h2>Result</h2>
          <JsonBlock value={j.result} label="Result" />
          <h2>Last error</h2>
          {j.last_error ? <Pre label="Last error" className="error-text">{j.last_error}</Pre> : <p className="muted">none</p>}
        </section>
        <section aria-labelledby="timeline" className="timeline-section">
          <h2 id="timeline">Timeline</h2>
          {events.error && timeline.length === 0 ? <p className="muted">{describeError(events.error)}</p> : null}
          <ol className="timeline" data-testid="timeline">
            {timeline.map((e, i) => (
              <li key={i} className={`ev ev-${e.type}`}>
                <span className="ev-type">{e.type}</span>
                <time dateTime={e.at} title={e.at}>{when(e.at)}</time>
                {eventDetail(e) ? <span className="ev-detail">{eventDetail(e)}</span> : null}
                <span className="muted">attempt {e.attempt}{e.worker_id ? ` · ${e.worker_id}` : ""}</span>
                {e.actor ? <span className="ev-actor" data-testid="event-actor">by {e.actor.name ? `${e.actor.name} (${e.actor.id})` : e.actor.id || e.actor.kind}</span> : null}
                {e.error && e.type !== "parked" ? <span className="error-text">{e.error}</span> : null}
              </li>
            ))}
          </ol>
        </section>
      </div>
      {j.durable ? (
        <section aria-labelledby="durable" className="durable-section" data-testid="durable">
          <h2 id="durable">Durable steps</h2>
          {j.durable.signal_key && !(j.durable.awaiting && !final) ? (
            <p className="small">Signal key <span className="mono">{j.durable.signal_key}</span></p>
          ) : null}
          <div className="durable-grid">
            <StepTimeline steps={j.durable.steps ?? []} />
            <div>
              <h3 id="signals">Signals received</h3>
              <SignalTable signals={j.durable.signals ?? []} />
              <h3 id="send-signal">Send a signal</h3>
              {final ? <p className="muted">The job has ended: it takes no more signals.</p> : <SignalForm job={j} />}
            </div>
          </div>
        </section>
      ) : null}
      <JobLogs key={j.id} id={j.id} tick={seen.length} />
      <section aria-labelledby="deps" className="deps-section">
        <h2 id="deps">Dependencies</h2>
        <p className="muted small">Parents to the left: a job waits for the jobs whose arrows point at it.</p>
        <DependencyGraph id={j.id} />
      </section>
      <Confirm
        open={confirm !== null}
        title={confirm === "cancel" ? "Cancel this job?" : "Retry this job?"}
        body={confirm === "cancel" ? <p>If it is running, its handler is told to stop. The job ends cancelled.</p> : <p>The job is queued again with its attempt count reset to 0.</p>}
        confirmLabel={confirm === "cancel" ? "Cancel job" : "Retry job"}
        danger={confirm === "cancel"}
        busy={action.isPending}
        onConfirm={() => confirm && action.mutate(confirm)}
        onCancel={() => setConfirm(null)}
      />
    </>
  );
}
