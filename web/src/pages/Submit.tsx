// Submit a job: JSON payload checked as you type, priority, delay or run
// time, attempts. On success the job's page opens and follows it live.

import { useState } from "react";
import { useMutation } from "@tanstack/react-query";
import { useLocation } from "wouter";
import { api, ApiError } from "../api/client";
import type { Priority } from "../api/types";
import { ErrorBanner } from "../components/ui";
import { Field } from "./ScheduleForm";
import { intIn, parseJSON, queueRe, typeRe } from "../lib/validate";

const builtins: Record<string, string> = {
  "sundial.echo": '{"hello": "world"}',
  "sundial.sleep": '{"ms": 250}',
  "sundial.fail": '{"times": 2, "message": "boom"}',
  "sundial.http": '{"method": "POST", "url": "https://example.com/hook", "body": "{}"}',
};

export interface SubmitForm {
  queue: string;
  type: string;
  payload: string;
  priority: Priority;
  when: "now" | "delay" | "at";
  delay: string;
  runAt: string;
  maxAttempts: string;
  timeout: string;
  idempotencyKey: string;
  dependsOn: string;
  group?: string;
  traceparent?: string;
}

export const groupRe = /^[A-Za-z0-9_.:@-]{1,128}$/;
export const traceparentRe = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/** buildSpec checks the form and returns the body of POST /v1/jobs, or the problems by field. */
export function buildSpec(f: SubmitForm): { errors: Partial<Record<keyof SubmitForm, string>>; spec?: Record<string, unknown> } {
  const errors: Partial<Record<keyof SubmitForm, string>> = {};
  if (!queueRe.test(f.queue)) errors.queue = "lower-case letters, digits, _ or -, up to 64";
  if (!typeRe.test(f.type)) errors.type = "required: letters, digits or . _ : -, up to 128";
  const payload = parseJSON(f.payload);
  if (!payload.ok) errors.payload = `not valid JSON: ${payload.error}`;
  const ma = intIn(f.maxAttempts, 1, 100, "max attempts");
  if (ma.error) errors.maxAttempts = ma.error;
  const to = intIn(f.timeout, 1, 86_400, "the timeout");
  if (to.error) errors.timeout = to.error;
  let delay: number | undefined;
  let runAt: string | undefined;
  if (f.when === "delay") {
    delay = Number(f.delay);
    if (f.delay.trim() === "" || !Number.isFinite(delay) || delay < 0 || delay > 31_622_400) errors.delay = "seconds from now, 0 to 31622400";
  } else if (f.when === "at") {
    const d = new Date(f.runAt);
    if (!f.runAt || Number.isNaN(d.getTime())) errors.runAt = "pick a date and time";
    else runAt = d.toISOString();
  }
  const group = f.group?.trim() ?? "";
  if (group && !groupRe.test(group)) errors.group = "letters, digits or . _ : @ -, up to 128";
  const tp = f.traceparent?.trim() ?? "";
  if (tp && !traceparentRe.test(tp)) errors.traceparent = "00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>";
  const deps = f.dependsOn.split(/[\s,]+/).filter(Boolean);
  if (Object.keys(errors).length > 0) return { errors };
  return {
    errors,
    spec: {
      queue: f.queue,
      type: f.type,
      priority: f.priority,
      ...(payload.ok && payload.value !== undefined ? { payload: payload.value } : {}),
      ...(ma.value ? { max_attempts: ma.value } : {}),
      ...(to.value ? { timeout_seconds: to.value } : {}),
      ...(delay !== undefined ? { delay_seconds: delay } : {}),
      ...(runAt ? { run_at: runAt } : {}),
      ...(f.idempotencyKey.trim() ? { idempotency_key: f.idempotencyKey.trim() } : {}),
      ...(deps.length ? { depends_on: deps } : {}),
      ...(group ? { group } : {}),
      ...(tp ? { traceparent: tp } : {}),
    },
  };
}

export function Submit() {
  const [, navigate] = useLocation();
  const [f, setF] = useState<SubmitForm>({
    queue: "default", type: "sundial.echo", payload: builtins["sundial.echo"], priority: "normal", when: "now",
    delay: "10", runAt: "", maxAttempts: "", timeout: "", idempotencyKey: "", dependsOn: "", group: "", traceparent: "",
  });
  const [touched, setTouched] = useState(false);
  const submit = useMutation({ mutationFn: api.submitJob, onSuccess: (j) => navigate(`/jobs/${j.id}`) });
  const { errors, spec } = buildSpec(f);
  const set = (p: Partial<SubmitForm>) => setF({ ...f, ...p });
  const err = (k: keyof SubmitForm) => (touched || k === "payload" ? errors[k] : undefined);
  const serverField = submit.error instanceof ApiError ? submit.error.field : undefined;

  return (
    <>
      <div className="page-head"><h1>Submit a job</h1></div>
      <form
        className="form narrow"
        aria-label="Submit a job"
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          setTouched(true);
          if (spec) submit.mutate(spec);
        }}
      >
        <div className="row">
          <Field label="Queue" error={err("queue")}>
            <input name="queue" value={f.queue} onChange={(e) => set({ queue: e.target.value })} />
          </Field>
          <Field label="Type" error={err("type")} hint="The handler that runs it">
            <input
              name="type"
              value={f.type}
              className="mono"
              list="types"
              onChange={(e) => {
                const t = e.target.value;
                const wasDefault = Object.values(builtins).includes(f.payload) || f.payload === "";
                set({ type: t, ...(builtins[t] && wasDefault ? { payload: builtins[t] } : {}) });
              }}
            />
          </Field>
        </div>
        <datalist id="types">{Object.keys(builtins).map((t) => <option key={t} value={t} />)}</datalist>
        <Field label="Payload (JSON)" error={err("payload")}>
          <textarea name="payload" value={f.payload} onChange={(e) => set({ payload: e.target.value })} rows={6} className="mono" spellCheck={false} />
        </Field>
        <div className="row">
          <Field label="Priority">
            <select name="priority" value={f.priority} onChange={(e) => set({ priority: e.target.value as Priority })}>
              <option>high</option><option>normal</option><option>low</option>
            </select>
          </Field>
          <Field label="Max attempts" error={err("maxAttempts")}>
            <input name="max_attempts" value={f.maxAttempts} onChange={(e) => set({ maxAttempts: e.target.value })} inputMode="numeric" placeholder="3" />
          </Field>
          <Field label="Timeout (s)" error={err("timeout")}>
            <input name="timeout" value={f.timeout} onChange={(e) => set({ timeout: e.target.value })} inputMode="numeric" placeholder="30" />
          </Field>
        </div>
        <fieldset>
          <legend>Run</legend>
          <div className="radio-row">
            <label><input type="radio" name="when" checked={f.when === "now"} onChange={() => set({ when: "now" })} /> now</label>
            <label><input type="radio" name="when" checked={f.when === "delay"} onChange={() => set({ when: "delay" })} /> after a delay</label>
            <label><input type="radio" name="when" checked={f.when === "at"} onChange={() => set({ when: "at" })} /> at a time</label>
          </div>
          {f.when === "delay" ? (
            <Field label="Delay (seconds)" error={err("delay")}>
              <input value={f.delay} onChange={(e) => set({ delay: e.target.value })} inputMode="decimal" />
            </Field>
          ) : null}
          {f.when === "at" ? (
            <Field label="Run at (your time zone)" error={err("runAt")}>
              <input type="datetime-local" value={f.runAt} onChange={(e) => set({ runAt: e.target.value })} />
            </Field>
          ) : null}
        </fieldset>
        <Field label="Group" error={err("group")} hint="Optional fairness group (a tenant): within a priority, groups take turns">
          <input name="group" value={f.group} onChange={(e) => set({ group: e.target.value })} className="mono" placeholder="e.g. customer-42" />
        </Field>
        <details open={!!(err("traceparent") || serverField === "traceparent") || undefined}>
          <summary>More options</summary>
          <Field label="Idempotency key" hint="The same key in the same queue within 24 h returns the first job">
            <input value={f.idempotencyKey} onChange={(e) => set({ idempotencyKey: e.target.value })} />
          </Field>
          <Field label="Depends on (job ids)" hint="Separated by spaces or commas; same queue">
            <input value={f.dependsOn} onChange={(e) => set({ dependsOn: e.target.value })} className="mono" />
          </Field>
          <Field label="Traceparent" error={err("traceparent")} hint="W3C trace context the handler's span continues">
            <input name="traceparent" value={f.traceparent} onChange={(e) => set({ traceparent: e.target.value })} className="mono" placeholder="00-…-…-01" />
          </Field>
        </details>
        <ErrorBanner error={submit.error} title={serverField ? `Refused (${serverField})` : "Refused"} />
        <div className="form-actions">
          <button type="submit" className="primary" disabled={submit.isPending}>{submit.isPending ? "Submitting…" : "Submit job"}</button>
        </div>
      </form>
    </>
  );
}
