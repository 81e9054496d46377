// Formatting helpers: numbers, times and durations as people read them.

const nf = new Intl.NumberFormat("en");

export function num(n: number | undefined | null): string {
  if (n === undefined || n === null || !Number.isFinite(n)) return "–";
  return nf.format(n);
}

export function rate(n: number): string {
  if (!Number.isFinite(n)) return "–";
  return n >= 100 ? nf.format(Math.round(n)) : n.toFixed(1);
}

export function duration(seconds: number): string {
  if (!Number.isFinite(seconds)) return "–";
  const s = Math.abs(seconds);
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.round((s % 86400) / 3600)} h`;
}

/** ago says how long ago (or in how long) t is, relative to now. */
export function ago(t: string | undefined | null, now = Date.now()): string {
  if (!t) return "–";
  const ms = Date.parse(t);
  if (!Number.isFinite(ms) || ms <= 0) return "–";
  const d = (now - ms) / 1000;
  if (Math.abs(d) < 1) return "now";
  return d > 0 ? `${duration(d)} ago` : `in ${duration(-d)}`;
}

/** when shows an absolute time in the browser's zone, seconds included. */
export function when(t: string | undefined | null): string {
  if (!t) return "–";
  const ms = Date.parse(t);
  if (!Number.isFinite(ms) || ms <= 0) return "–";
  return new Date(ms).toLocaleString(undefined, {
    year: "numeric", month: "short", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
}

export function json(v: unknown): string {
  if (v === undefined) return "";
  return JSON.stringify(v, null, 2);
}

/** shortId keeps the end of a long id, where time-ordered ids differ. */
export function shortId(id: string): string {
  return id.length > 14 ? "…" + id.slice(-10) : id;
}

/** toInput turns an RFC 3339 time into a datetime-local value (local time). */
export function toInput(iso: string | null | undefined): string {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  const off = d.getTimezoneOffset() * 60_000;
  return new Date(d.getTime() - off).toISOString().slice(0, 16);
}

/** fromInput turns a datetime-local value (local time) into RFC 3339, undefined when empty or bad. */
export function fromInput(v: string): string | undefined {
  if (!v) return undefined;
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}
