// A queue's limits (docs/flow-control.md): the table, fed by the live stats,
// and a small form that creates or replaces one (PUT) with checks as you
// type; the API's objection is shown next to the field it names. Delete is
// confirmed.

import { useState } from "react";
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { api, ApiError } from "../api/client";
import type { Limit, LimitStatus } from "../api/types";
import { Field } from "../pages/ScheduleForm";
import { Confirm, ErrorBanner, TableWrap } from "./ui";
import { intIn, typeRe } from "../lib/validate";
import { num } from "../lib/format";

export const limitNameRe = /^[A-Za-z0-9_.-]{1,64}$/;
export const limitKeyRe = /^[A-Za-z0-9_-]{1,64}$/;

export interface LimitForm {
  name: string;
  types: string;
  key: string;
  concurrency: string;
  rateLimit: string;
  ratePeriod: string;
}

export const blankLimit: LimitForm = { name: "", types: "", key: "", concurrency: "", rateLimit: "", ratePeriod: "60" };

export function limitToForm(l: LimitStatus): LimitForm {
  return {
    name: l.name,
    types: (l.types ?? []).join(", "),
    key: l.key ?? "",
    concurrency: l.concurrency ? String(l.concurrency) : "",
    rateLimit: l.rate ? String(l.rate.limit) : "",
    ratePeriod: l.rate ? String(l.rate.period_seconds) : "60",
  };
}

type Errors = Partial<Record<keyof LimitForm, string>>;

/** checkLimit returns the form's problems by field, and the body of the PUT when there are none. */
export function checkLimit(f: LimitForm): { errors: Errors; limit?: Limit } {
  const errors: Errors = {};
  if (!limitNameRe.test(f.name)) errors.name = "1–64 letters, digits or . _ -";
  const types = f.types.split(/[\s,]+/).filter(Boolean);
  const badType = types.find((t) => !typeRe.test(t));
  if (badType) errors.types = `"${badType}" is not a job type (letters, digits or . _ : -)`;
  else if (new Set(types).size !== types.length) errors.types = "a type is named twice";
  else if (types.length > 100) errors.types = "at most 100 types";
  const key = f.key.trim();
  if (key && !limitKeyRe.test(key)) errors.key = "a top-level payload field: letters, digits, _ or -, up to 64";
  const conc = intIn(f.concurrency, 1, 10_000, "concurrency");
  if (conc.error) errors.concurrency = conc.error;
  const rl = intIn(f.rateLimit, 1, 10_000, "the rate limit");
  if (rl.error) errors.rateLimit = rl.error;
  const rp = intIn(f.ratePeriod, 1, 86_400, "the period");
  if (rp.error) errors.ratePeriod = rp.error;
  else if (rl.value !== undefined && rp.value === undefined) errors.ratePeriod = "the period is required with a rate";
  if (!errors.concurrency && !errors.rateLimit && conc.value === undefined && rl.value === undefined) {
    errors.concurrency = "set a concurrency, a rate, or both";
  }
  if (Object.keys(errors).length > 0) return { errors };
  return {
    errors,
    limit: {
      ...(types.length ? { types } : {}),
      ...(key ? { key } : {}),
      ...(conc.value ? { concurrency: conc.value } : {}),
      ...(rl.value && rp.value ? { rate: { limit: rl.value, period_seconds: rp.value } } : {}),
    },
  };
}

/** formField maps the API's error.field ("types[1]", "rate.period_seconds") to the form's field. */
export function formField(apiField: string | undefined): keyof LimitForm | undefined {
  if (!apiField) return undefined;
  if (apiField === "name") return "name";
  if (apiField === "key") return "key";
  if (apiField === "concurrency") return "concurrency";
  if (apiField === "types" || apiField.startsWith("types[")) return "types";
  if (apiField === "rate.period_seconds") return "ratePeriod";
  if (apiField === "rate" || apiField.startsWith("rate.")) return "rateLimit";
  return undefined;
}

const units: [number, string][] = [[86_400, "day"], [3_600, "h"], [60, "min"], [1, "s"]];

/** formatRate says "10 / min", "5 / 2 h" or "3 / 90 s". */
export function formatRate(r: { limit: number; period_seconds: number }): string {
  for (const [secs, unit] of units) {
    if (r.period_seconds % secs === 0) {
      const n = r.period_seconds / secs;
      return `${num(r.limit)} / ${n === 1 ? "" : n + " "}${unit}`;
    }
  }
  return `${num(r.limit)} / ${r.period_seconds} s`;
}

/** concurrency says "1 / 3" (active of the cap), or for a keyed limit the cap per value. */
function concurrency(l: LimitStatus) {
  if (!l.concurrency) return <span className="muted">–</span>;
  if (l.key) return <span title={`at most ${l.concurrency} per value of ${l.key}`}>{num(l.active)} active<span className="sub">{num(l.concurrency)} per key</span></span>;
  return `${num(l.active)} / ${num(l.concurrency)}`;
}

interface FormProps {
  queue: string;
  initial?: LimitStatus;
  onDone: () => void;
}

/** LimitEditor creates a limit (no initial) or replaces one. */
export function LimitEditor({ queue, initial, onDone }: FormProps) {
  const qc = useQueryClient();
  const [f, setF] = useState<LimitForm>(initial ? limitToForm(initial) : blankLimit);
  const [touched, setTouched] = useState<Partial<Record<keyof LimitForm, boolean>>>({});
  const [tried, setTried] = useState(false);
  const save = useMutation({
    mutationFn: (v: { name: string; limit: Limit }) => api.putLimit(queue, v.name, v.limit),
    onSuccess: () => {
      qc.invalidateQueries({ queryKey: ["queues"] });
      onDone();
    },
  });
  const { errors, limit } = checkLimit(f);
  const apiErr = save.error instanceof ApiError ? save.error : undefined;
  const apiField = apiErr?.status === 400 ? formField(apiErr.field) : undefined;
  const set = (k: keyof LimitForm, v: string) => {
    setF({ ...f, [k]: v });
    setTouched({ ...touched, [k]: true });
    if (save.error) save.reset();
  };
  const err = (k: keyof LimitForm) => (tried || touched[k] ? errors[k] : undefined) ?? (apiField === k ? apiErr?.message : undefined);
  const title = initial ? `Edit limit ${initial.name}` : `New limit on ${queue}`;
  return (
    <form
      className="limit-form"
      aria-label={title}
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        setTried(true);
        if (limit) save.mutate({ name: f.name, limit });
      }}
    >
      <h3>{title}</h3>
      <div className="row">
        <Field label="Name" error={err("name")}>
          <input name="name" value={f.name} onChange={(e) => set("name", e.target.value)} readOnly={!!initial} autoFocus={!initial} className="mono" />
        </Field>
        <Field label="Types" error={err("types")} hint="Comma-separated; empty: all types">
          <input name="types" value={f.types} onChange={(e) => set("types", e.target.value)} className="mono" placeholder="all types" />
        </Field>
        <Field label="Key" error={err("key")} hint="Payload field: a cap per value">
          <input name="key" value={f.key} onChange={(e) => set("key", e.target.value)} className="mono" placeholder="e.g. customer_id" />
        </Field>
      </div>
      <div className="row">
        <Field label="Concurrency" error={err("concurrency")} hint="Running at once">
          <input name="concurrency" value={f.concurrency} onChange={(e) => set("concurrency", e.target.value)} inputMode="numeric" placeholder="none" />
        </Field>
        <Field label="Rate limit" error={err("rateLimit")} hint="Starts per period">
          <input name="rate_limit" value={f.rateLimit} onChange={(e) => set("rateLimit", e.target.value)} inputMode="numeric" placeholder="none" />
        </Field>
        <Field label="Period (s)" error={err("ratePeriod")}>
          <input name="rate_period" value={f.ratePeriod} onChange={(e) => set("ratePeriod", e.target.value)} inputMode="numeric" />
        </Field>
      </div>
      {save.error && !apiField ? <ErrorBanner error={save.error} title="Refused" /> : null}
      <div className="form-actions">
        <button type="submit" className="primary small" disabled={save.isPending}>{save.isPending ? "Saving…" : initial ? "Save limit" : "Create limit"}</button>
        <button type="button" className="small" onClick={onDone}>Cancel</button>
      </div>
    </form>
  );
}

/** Limits is a queue's limit table with add, edit and delete. */
export function Limits({ queue, limits }: { queue: string; limits: LimitStatus[] }) {
  const qc = useQueryClient();
  const [editing, setEditing] = useState<string | null>(null); // "" = new
  const [deleting, setDeleting] = useState<string | null>(null);
  const del = useMutation({
    mutationFn: (name: string) => api.deleteLimit(queue, name),
    onSuccess: () => {
      qc.invalidateQueries({ queryKey: ["queues"] });
      setDeleting(null);
    },
  });
  const current = editing ? limits.find((l) => l.name === editing) : undefined;
  return (
    <section className="limits" aria-label={`Limits of ${queue}`}>
      <div className="limits-head">
        <h3>Limits</h3>
        <button type="button" className="small" onClick={() => setEditing("")} disabled={editing === ""} aria-label={`Add limit to ${queue}`}>
          Add limit
        </button>
      </div>
      {limits.length === 0 ? (
        <p className="muted">No limits: every queued job may start.</p>
      ) : (
        <TableWrap label={`Limits of ${queue}`}>
          <table className="grid compact" aria-label={`Limits of ${queue}`}>
            <thead>
              <tr>
                <th scope="col">name</th>
                <th scope="col">covers</th>
                <th scope="col">key</th>
                <th scope="col" className="num">concurrency</th>
                <th scope="col" className="num">rate</th>
                <th scope="col" className="num">throttled</th>
                <th scope="col"><span className="sr-only">actions</span></th>
              </tr>
            </thead>
            <tbody>
              {limits.map((l) => (
                <tr key={l.name} data-limit={l.name}>
                  <th scope="row" className="mono">{l.name}</th>
                  <td className="covers">
                    {l.types?.length ? l.types.map((t) => <span key={t} className="chip mono">{t}</span>) : <span className="muted">all types</span>}
                  </td>
                  <td className="mono">{l.key || <span className="muted">–</span>}</td>
                  <td className="num" data-testid="limit-concurrency">{concurrency(l)}</td>
                  <td className="num">{l.rate ? formatRate(l.rate) : <span className="muted">–</span>}</td>
                  <td className="num" data-testid="limit-throttled">{l.throttled > 0 ? <strong className="warn-text">{num(l.throttled)}</strong> : "0"}</td>
                  <td className="row-actions">
                    <button type="button" className="small" onClick={() => setEditing(l.name)} aria-label={`Edit limit ${l.name}`}>Edit</button>
                    <button type="button" className="small danger-outline" onClick={() => setDeleting(l.name)} aria-label={`Delete limit ${l.name}`}>Delete</button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      )}
      {editing !== null && (editing === "" || current) ? (
        <LimitEditor key={editing} queue={queue} initial={current} onDone={() => setEditing(null)} />
      ) : null}
      <Confirm
        open={deleting !== null}
        title={`Delete limit ${deleting ?? ""}?`}
        body={<><p>Every job it holds back may start at once.</p>{del.error ? <ErrorBanner error={del.error} title="Not deleted" /> : null}</>}
        confirmLabel="Delete limit"
        danger
        busy={del.isPending}
        onConfirm={() => deleting && del.mutate(deleting)}
        onCancel={() => { setDeleting(null); del.reset(); }}
      />
    </section>
  );
}
