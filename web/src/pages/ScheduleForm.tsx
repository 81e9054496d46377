// Create or edit a schedule, with checks as you type and the next five fire
// times previewed by the API (POST /v1/schedules/preview).

import { cloneElement, useEffect, useId, useState } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { Link, useLocation } from "wouter";
import { api, ApiError, describeError } from "../api/client";
import type { Misfire, Priority, Schedule } from "../api/types";
import { ErrorBanner } from "../components/ui";
import { intIn, parseJSON, queueRe, scheduleIdRe, typeRe } from "../lib/validate";
import { when } from "../lib/format";

interface Form {
  id: string;
  mode: "cron" | "every";
  cron: string;
  every: string;
  timezone: string;
  queue: string;
  type: string;
  payload: string;
  priority: Priority;
  maxAttempts: string;
  misfire: Misfire;
  enabled: boolean;
}

const blank: Form = {
  id: "", mode: "cron", cron: "*/5 * * * *", every: "60", timezone: "UTC", queue: "default", type: "sundial.echo",
  payload: "{}", priority: "normal", maxAttempts: "", misfire: "run_once", enabled: true,
};

function fromSchedule(s: Schedule): Form {
  return {
    id: s.id, mode: s.cron ? "cron" : "every", cron: s.cron ?? "", every: String(s.every_seconds ?? ""), timezone: s.timezone || "UTC",
    queue: s.job.queue ?? "default", type: s.job.type, payload: s.job.payload === undefined ? "" : JSON.stringify(s.job.payload, null, 2),
    priority: s.job.priority ?? "normal", maxAttempts: s.job.max_attempts ? String(s.job.max_attempts) : "",
    misfire: s.misfire ?? "run_once", enabled: s.enabled ?? true,
  };
}

/** checkSchedule returns the form's problems by field, and the schedule to send when there are none. */
export function checkSchedule(f: Form, editing: boolean): { errors: Partial<Record<keyof Form, string>>; schedule?: Schedule } {
  const errors: Partial<Record<keyof Form, string>> = {};
  if (!editing && !scheduleIdRe.test(f.id)) errors.id = "1–128 letters, digits or . _ : -";
  let every: number | undefined;
  if (f.mode === "cron") {
    if (f.cron.trim() === "") errors.cron = "a cron expression is required";
  } else {
    const r = intIn(f.every, 1, 31_622_400, "the interval");
    if (r.error || r.value === undefined) errors.every = r.error ?? "the interval is required";
    every = r.value;
  }
  if (!queueRe.test(f.queue)) errors.queue = "lower-case letters, digits, _ or -, up to 64";
  if (!typeRe.test(f.type)) errors.type = "letters, digits or . _ : -, up to 128";
  const payload = parseJSON(f.payload);
  if (!payload.ok) errors.payload = `not valid JSON: ${payload.error}`;
  const ma = intIn(f.maxAttempts, 1, 100, "max attempts");
  if (ma.error) errors.maxAttempts = ma.error;
  if (Object.keys(errors).length > 0) return { errors };
  return {
    errors,
    schedule: {
      id: f.id,
      ...(f.mode === "cron" ? { cron: f.cron.trim() } : { every_seconds: every }),
      timezone: f.timezone.trim() || "UTC",
      job: {
        queue: f.queue, type: f.type, priority: f.priority,
        ...(payload.ok && payload.value !== undefined ? { payload: payload.value } : {}),
        ...(ma.value ? { max_attempts: ma.value } : {}),
      },
      enabled: f.enabled,
      misfire: f.misfire,
    },
  };
}

function usePreview(f: Form) {
  const spec = f.mode === "cron" ? { cron: f.cron.trim(), timezone: f.timezone.trim() } : { every_seconds: Number(f.every), timezone: f.timezone.trim() };
  const key = JSON.stringify(spec);
  const [debounced, setDebounced] = useState(key);
  useEffect(() => {
    const t = setTimeout(() => setDebounced(key), 300);
    return () => clearTimeout(t);
  }, [key]);
  return useQuery({
    queryKey: ["preview", debounced],
    queryFn: () => api.previewSchedule(JSON.parse(debounced)),
    retry: false,
    staleTime: 30_000,
  });
}

export function ScheduleForm({ id }: { id?: string }) {
  const editing = !!id;
  const [, navigate] = useLocation();
  const qc = useQueryClient();
  const existing = useQuery({ queryKey: ["schedule", id], queryFn: () => api.getSchedule(id!), enabled: editing, retry: false });
  const [form, setForm] = useState<Form | null>(editing ? null : blank);
  const [touched, setTouched] = useState(false);
  if (existing.data && !form) setForm(fromSchedule(existing.data));

  const save = useMutation({
    mutationFn: (s: Schedule) => api.putSchedule(s),
    onSuccess: () => {
      qc.invalidateQueries({ queryKey: ["schedules"] });
      navigate("/schedules");
    },
  });
  const f = form ?? blank;
  const preview = usePreview(f);
  if (editing && !form) return existing.error ? <ErrorBanner error={existing.error} /> : <p aria-busy="true">Loading…</p>;

  const { errors, schedule } = checkSchedule(f, editing);
  const serverField = save.error instanceof ApiError ? save.error.field : undefined;
  const set = (patch: Partial<Form>) => setForm({ ...f, ...patch });
  const err = (k: keyof Form) => (touched || k === "payload" ? errors[k] : undefined);

  return (
    <>
      <div className="page-head">
        <h1>{editing ? <>Edit schedule <span className="mono">{id}</span></> : "New schedule"}</h1>
      </div>
      <div className="form-grid">
        <form
          className="form"
          aria-label={editing ? "Edit schedule" : "New schedule"}
          noValidate
          onSubmit={(e) => {
            e.preventDefault();
            setTouched(true);
            if (schedule) save.mutate(schedule);
          }}
        >
          {!editing ? (
            <Field label="Id" error={err("id")} hint="Chosen by you; names the schedule in the API.">
              <input value={f.id} onChange={(e) => set({ id: e.target.value })} className="mono" required placeholder="nightly-report" />
            </Field>
          ) : null}
          <fieldset>
            <legend>Timing</legend>
            <div className="radio-row">
              <label><input type="radio" name="mode" checked={f.mode === "cron"} onChange={() => set({ mode: "cron" })} /> cron expression</label>
              <label><input type="radio" name="mode" checked={f.mode === "every"} onChange={() => set({ mode: "every" })} /> fixed interval</label>
            </div>
            {f.mode === "cron" ? (
              <Field label="Cron" error={err("cron") ?? (serverField === "cron" ? describeError(save.error) : undefined)} hint="5 fields (6 with seconds) or @hourly, @daily…">
                <input value={f.cron} onChange={(e) => set({ cron: e.target.value })} className="mono" />
              </Field>
            ) : (
              <Field label="Every (seconds)" error={err("every")}>
                <input value={f.every} onChange={(e) => set({ every: e.target.value })} inputMode="numeric" />
              </Field>
            )}
            <Field label="Time zone" hint="IANA name, e.g. Europe/Berlin" error={serverField === "timezone" ? describeError(save.error) : undefined}>
              <input value={f.timezone} onChange={(e) => set({ timezone: e.target.value })} list="zones" />
            </Field>
            <datalist id="zones">
              {["UTC", "Europe/Berlin", "Europe/London", "America/New_York", "America/Los_Angeles", "Asia/Tokyo", "Australia/Sydney"].map((z) => <option key={z} value={z} />)}
            </datalist>
            <Field label="After downtime (misfire)">
              <select value={f.misfire} onChange={(e) => set({ misfire: e.target.value as Misfire })}>
                <option value="run_once">run once</option>
                <option value="skip">skip</option>
                <option value="run_all">run all (up to 100)</option>
              </select>
            </Field>
          </fieldset>
          <fieldset>
            <legend>Job</legend>
            <Field label="Queue" error={err("queue")}>
              <input value={f.queue} onChange={(e) => set({ queue: e.target.value })} />
            </Field>
            <Field label="Type" error={err("type")}>
              <input value={f.type} onChange={(e) => set({ type: e.target.value })} className="mono" list="types" />
            </Field>
            <Field label="Payload (JSON)" error={err("payload")}>
              <textarea value={f.payload} onChange={(e) => set({ payload: e.target.value })} rows={5} className="mono" spellCheck={false} />
            </Field>
            <div className="row">
              <Field label="Priority">
                <select value={f.priority} onChange={(e) => set({ priority: e.target.value as Priority })}>
                  <option>high</option><option>normal</option><option>low</option>
                </select>
              </Field>
              <Field label="Max attempts" error={err("maxAttempts")}>
                <input value={f.maxAttempts} onChange={(e) => set({ maxAttempts: e.target.value })} inputMode="numeric" placeholder="3" />
              </Field>
            </div>
          </fieldset>
          <label className="check"><input type="checkbox" checked={f.enabled} onChange={(e) => set({ enabled: e.target.checked })} /> enabled</label>
          <ErrorBanner error={save.error} title="Not saved" />
          <div className="form-actions">
            <Link href="/schedules" className="button">Cancel</Link>
            <button type="submit" className="primary" disabled={save.isPending}>{save.isPending ? "Saving…" : editing ? "Save" : "Create schedule"}</button>
          </div>
        </form>
        <aside className="preview" aria-live="polite" aria-labelledby="preview-title">
          <h2 id="preview-title">Next five runs</h2>
          {preview.error ? (
            <p className="error-text" role="alert">{describeError(preview.error)}</p>
          ) : preview.data ? (
            <ol data-testid="preview">{preview.data.upcoming.map((t) => <li key={t}><time dateTime={t}>{when(t)}</time></li>)}</ol>
          ) : (
            <p className="muted">…</p>
          )}
          <p className="muted small">Times in your browser's zone; computed by the API.</p>
        </aside>
      </div>
    </>
  );
}

function Field({ label, error, hint, children }: { label: string; error?: string; hint?: string; children: React.ReactElement<Record<string, unknown>> }) {
  const id = useId();
  const note = error ?? hint;
  return (
    <div className={error ? "field invalid" : "field"}>
      <label className="field-label" htmlFor={id}>{label}</label>
      {cloneElement(children, { id, "aria-invalid": error ? true : undefined, "aria-describedby": note ? id + "-note" : undefined })}
      {error ? <span id={id + "-note"} className="field-error" role="alert">{error}</span> : hint ? <span id={id + "-note"} className="field-hint">{hint}</span> : null}
    </div>
  );
}

export { Field };
