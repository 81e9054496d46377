// A durable job on its page (docs/durable.md): the wait of a parked job,
// its recorded steps as a timeline, the signals it received, and the form
// that sends it a signal (POST /v1/jobs/{id}/signals/{signal}).

import { useState } from "react";
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { Link } from "wouter";
import { api, ApiError } from "../api/client";
import type { Awaiting, DurableSignal, DurableStep, Job, SignalResult, StepStatus } from "../api/types";
import { ErrorBanner, JsonBlock, Pre, TableWrap } from "./ui";
import { Field } from "../pages/ScheduleForm";
import { ago, duration, when } from "../lib/format";
import { parseJSON } from "../lib/validate";

/** childrenSignal is the prefix of the signal a parent awaiting its children (RunChildren) waits for; the rest is the batch's id. */
const childrenSignal = "sundial.children:";

/** StepKind is what a recorded step is, read from its name. */
export type StepKind =
  | { kind: "step"; label: string }
  | { kind: "sleep"; label: string }
  | { kind: "signal"; label: string; signal: string }
  | { kind: "children"; label: string; batch?: string }
  | { kind: "children-wait"; label: string; batch: string }
  | { kind: "children-results"; label: string };

/**
 * stepKind reads a step's name as the worker libraries write it: "sleep",
 * "signal:<name>" (a wait for a signal; "signal:sundial.children:<batch>"
 * is RunChildren's wait for its children), "children:<name>" (the children
 * submitted, its result the batch's id) and "children:<name>:results".
 */
export function stepKind(s: Pick<DurableStep, "name" | "result">): StepKind {
  const n = s.name;
  if (n === "sleep") return { kind: "sleep", label: "Sleep" };
  if (n.startsWith("signal:" + childrenSignal)) {
    const batch = n.slice(("signal:" + childrenSignal).length);
    return { kind: "children-wait", label: "Wait for the children to end", batch };
  }
  if (n.startsWith("signal:")) {
    const signal = n.slice("signal:".length);
    return { kind: "signal", label: `Wait for signal “${signal}”`, signal };
  }
  if (n.startsWith("children:") && n.endsWith(":results") && n.length > "children:".length + ":results".length) {
    return { kind: "children-results", label: `Children “${n.slice("children:".length, -":results".length)}”: how they ended` };
  }
  if (n.startsWith("children:")) {
    return { kind: "children", label: `Children “${n.slice("children:".length)}” submitted`, batch: typeof s.result === "string" ? s.result : undefined };
  }
  return { kind: "step", label: n };
}

/** What each status says, in words and a glyph: never told by colour alone. */
const statusText: Record<StepStatus, { label: string; glyph: string }> = {
  ok: { label: "ok", glyph: "✓" },
  err: { label: "failed", glyph: "✕" },
  wait: { label: "waiting", glyph: "…" },
  timeout: { label: "timed out", glyph: "⧗" },
};

export function StepStatusBadge({ status }: { status: StepStatus | string }) {
  const t = statusText[status as StepStatus] ?? { label: status, glyph: "•" };
  return (
    <span className={`badge step-${status}`} data-status={status}>
      <span aria-hidden="true">{t.glyph} </span>{t.label}
    </span>
  );
}

/** stepDuration is how long a step took (ended) or has been waiting (now), in words. */
export function stepDuration(s: DurableStep, now = Date.now()): string {
  const start = Date.parse(s.started_at);
  const end = s.ended_at ? Date.parse(s.ended_at) : now;
  if (!Number.isFinite(start) || !Number.isFinite(end)) return "–";
  return s.ended_at ? duration((end - start) / 1000) : `${duration((end - start) / 1000)} so far`;
}

/** preview is the first line of a JSON value, for a collapsed result's summary. */
function preview(v: unknown): string {
  const s = JSON.stringify(v) ?? "";
  return s.length > 60 ? s.slice(0, 59) + "…" : s;
}

/** StepTimeline shows a durable job's recorded steps, in order. */
export function StepTimeline({ steps }: { steps: DurableStep[] }) {
  if (steps.length === 0) return <p className="muted">No step recorded yet.</p>;
  return (
    <ol className="steps" data-testid="steps" aria-label="Recorded steps">
      {steps.map((s) => {
        const k = stepKind(s);
        const batch = k.kind === "children" || k.kind === "children-wait" ? k.batch : undefined;
        return (
          <li key={s.seq} className={`step step-kind-${k.kind}`} data-step={s.name} data-status={s.status}>
            <div className="step-head">
              <span className="step-seq" aria-label={`step ${s.seq}`}>{s.seq}</span>
              <span className="step-name">
                {k.kind === "step" ? <span className="mono">{k.label}</span> : k.label}
                {k.kind !== "step" ? <span className="mono muted small"> {s.name}</span> : null}
              </span>
              <StepStatusBadge status={s.status} />
            </div>
            <dl className="step-times">
              <div><dt>started</dt><dd><time dateTime={s.started_at} title={s.started_at}>{when(s.started_at)}</time></dd></div>
              <div><dt>ended</dt><dd>{s.ended_at ? <time dateTime={s.ended_at} title={s.ended_at}>{when(s.ended_at)}</time> : "–"}</dd></div>
              <div><dt>{s.ended_at ? "took" : "elapsed"}</dt><dd>{stepDuration(s)}</dd></div>
              {s.deadline && (s.status === "wait" || s.status === "timeout") ? (
                <div>
                  <dt>{k.kind === "sleep" ? "until" : "deadline"}</dt>
                  <dd><time dateTime={s.deadline} title={s.deadline}>{when(s.deadline)}</time> ({ago(s.deadline)})</dd>
                </div>
              ) : null}
            </dl>
            {batch ? <p className="step-note">Batch <Link href={`/batches/${encodeURIComponent(batch)}`} className="mono">{batch}</Link></p> : null}
            {s.status === "err" && s.error ? <Pre label={`Error of step ${s.seq}`} className="error-text">{s.error}</Pre> : null}
            {s.status === "ok" && s.result !== undefined && s.result !== null ? (
              <details className="step-result">
                <summary>{k.kind === "signal" ? "Value" : "Result"} <span className="mono muted">{preview(s.result)}</span></summary>
                <JsonBlock value={s.result} label={`Result of step ${s.seq}`} />
              </details>
            ) : null}
          </li>
        );
      })}
    </ol>
  );
}

/** DurableWait says, prominently, what a parked job waits for and until when. */
export function DurableWait({ awaiting, signalKey, queue }: { awaiting: Awaiting; signalKey?: string; queue: string }) {
  const until = (
    <time dateTime={awaiting.until} title={awaiting.until}>{when(awaiting.until)}</time>
  );
  let what;
  if (awaiting.kind === "sleep") {
    what = <>Sleeping until {until} ({ago(awaiting.until)}).</>;
  } else if (awaiting.signal?.startsWith(childrenSignal)) {
    const batch = awaiting.signal.slice(childrenSignal.length);
    what = <>Waiting for its children (batch <Link href={`/batches/${encodeURIComponent(batch)}`} className="mono">{batch}</Link>) to end.</>;
  } else {
    what = <>Waiting for signal <strong className="mono">{awaiting.signal}</strong> until {until} ({ago(awaiting.until)}).</>;
  }
  return (
    <div className="banner info durable-wait" data-testid="durable-wait" data-kind={awaiting.kind} data-signal={awaiting.signal ?? ""}>
      <strong>Parked: </strong>{what}
      {signalKey ? (
        <div className="small" data-testid="signal-key">
          Signal key <span className="mono">{signalKey}</span>: senders may use it instead of the job's id
          (<span className="mono">POST /v1/signals</span> with queue <span className="mono">{queue}</span> and this key).
        </div>
      ) : null}
      <div className="small">It holds no worker; it runs again when {awaiting.kind === "sleep" ? "the time comes" : "the signal arrives, or at that time without it"}.</div>
    </div>
  );
}

/** SignalTable lists the signals a job received. */
export function SignalTable({ signals }: { signals: DurableSignal[] }) {
  if (signals.length === 0) return <p className="muted">No signal received.</p>;
  return (
    <TableWrap label="Signals received">
      <table className="grid compact" aria-label="Signals received" data-testid="signals">
        <thead><tr><th scope="col">name</th><th scope="col">received</th><th scope="col">value</th></tr></thead>
        <tbody>
          {signals.map((s) => (
            <tr key={s.name} data-signal={s.name}>
              <th scope="row" className="mono">{s.name}</th>
              <td><time dateTime={s.at} title={s.at}>{when(s.at)}</time></td>
              <td className="mono signal-value">{s.value === undefined || s.value === null ? <span className="muted">none</span> : JSON.stringify(s.value)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </TableWrap>
  );
}

/** checkSignalName is the API's rule for names: 1 to 200 characters, no tabs or line breaks. */
export function checkSignalName(name: string): string | undefined {
  if (name === "") return "required";
  if (name.length > 200) return "at most 200 characters";
  if (/[\t\r\n]/.test(name)) return "no tabs or line breaks";
  return undefined;
}

/** SignalForm sends the job a signal: a name, a JSON value checked as you type, an optional idempotency key. */
export function SignalForm({ job }: { job: Job }) {
  const qc = useQueryClient();
  const awaited = job.durable?.awaiting?.kind === "signal" ? job.durable.awaiting.signal : undefined;
  // The name follows the awaited signal, unless another was typed in; it
  // stays when the wait ends (the signal arrived).
  const suggested = awaited && !awaited.startsWith(childrenSignal) ? awaited : "";
  const [name, setName] = useState(suggested);
  const [lastSuggested, setLastSuggested] = useState(suggested);
  if (suggested !== lastSuggested) {
    setLastSuggested(suggested);
    if (suggested && (name === "" || name === lastSuggested)) setName(suggested);
  }
  const [value, setValue] = useState("");
  const [key, setKey] = useState("");
  const [touched, setTouched] = useState(false);
  const send = useMutation({
    mutationFn: (v: { name: string; value: unknown; key: string }) =>
      api.signalJob(job.id, v.name, { ...(v.value !== undefined ? { value: v.value } : {}), ...(v.key ? { idempotency_key: v.key } : {}) }),
    onSuccess: () => qc.invalidateQueries({ queryKey: ["job", job.id] }),
  });
  const parsed = parseJSON(value);
  const nameError = touched ? checkSignalName(name.trim()) : undefined;
  const valueError = parsed.ok ? undefined : `not valid JSON: ${parsed.error}`;
  const keyError = key.trim().length > 200 ? "at most 200 characters" : undefined;
  const sent = send.variables;
  return (
    <form
      className="signal-form"
      aria-label="Send a signal"
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        setTouched(true);
        if (checkSignalName(name.trim()) || !parsed.ok || keyError) return;
        send.mutate({ name: name.trim(), value: parsed.value, key: key.trim() });
      }}
    >
      <div className="row">
        <Field label="Signal" error={nameError} hint={awaited ? "The signal it waits for" : "Its name, as the handler waits for it"}>
          <input name="signal" value={name} className="mono" onChange={(e) => setName(e.target.value)} />
        </Field>
        <Field label="Idempotency key" error={keyError} hint="Optional: the same key sent again answers duplicate">
          <input name="idempotency_key" value={key} className="mono" onChange={(e) => setKey(e.target.value)} />
        </Field>
      </div>
      <Field label="Value (JSON)" error={valueError} hint='Any JSON, e.g. "ups" or {"carrier": "ups"}; empty: no value'>
        <textarea name="value" value={value} rows={3} className="mono" spellCheck={false} onChange={(e) => setValue(e.target.value)} />
      </Field>
      <ErrorBanner error={send.error} title={send.error instanceof ApiError && send.error.status === 409 ? "Not delivered" : "Refused"} />
      {send.data && sent ? <SignalAnswer answer={send.data} name={sent.name} /> : null}
      <div className="form-actions">
        <button type="submit" className="primary" disabled={send.isPending}>{send.isPending ? "Sending…" : "Send signal"}</button>
      </div>
    </form>
  );
}

function SignalAnswer({ answer, name }: { answer: SignalResult; name: string }) {
  return (
    <div className="banner ok" role="status" data-testid="signal-answer" data-status={answer.status}>
      {answer.status === "duplicate"
        ? <>Duplicate: the job had signal <span className="mono">{name}</span> with this idempotency key already; nothing changed.</>
        : <>Delivered: signal <span className="mono">{name}</span> is kept on the job; a job parked for it is queued at once.</>}
    </div>
  );
}
