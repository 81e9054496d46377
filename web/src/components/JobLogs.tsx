// A job's log (GET /v1/jobs/{id}/logs): the lines its handlers logged
// (ctx.log in the SDKs, sundial.Logger in Go), read once, then again from
// the last line read (?after=) whenever the stream says the job changed (a
// `log` event: lines were added). The job keeps its last lines up to a cap
// and counts those it dropped; the panel says so.

import { useCallback, useEffect, useLayoutEffect, useRef, useState } from "react";
import { api, describeError } from "../api/client";
import type { JobLogLine } from "../api/types";
import { num } from "../lib/format";

/** maxShown bounds the lines the panel holds: the oldest go first. */
export const maxShown = 5000;

export interface LogState {
  lines: JobLogLine[];
  /** lines the job dropped (past its cap), as the API counts them */
  dropped: number;
  /** lines read but no longer held here (past maxShown) */
  trimmed: number;
  /** the seq to read after next */
  next: number;
}

export const emptyLog: LogState = { lines: [], dropped: 0, trimmed: 0, next: 0 };

/** appendLog adds a page's lines to the state: only lines past the last seq read (a page read twice adds nothing), the oldest dropped past max. */
export function appendLog(s: LogState, page: { lines: JobLogLine[]; dropped: number; next_after: number }, max = maxShown): LogState {
  const fresh = page.lines.filter((l) => l.seq > s.next);
  let lines = fresh.length ? s.lines.concat(fresh) : s.lines;
  let trimmed = s.trimmed;
  if (lines.length > max) {
    trimmed += lines.length - max;
    lines = lines.slice(lines.length - max);
  }
  const next = Math.max(s.next, page.next_after || 0, ...fresh.map((l) => l.seq));
  return { lines, dropped: Math.max(s.dropped, page.dropped), trimmed, next };
}

/** clock shows a line's time of day, to the millisecond (the whole time is its title). */
function clock(at: string): string {
  const d = new Date(at);
  if (Number.isNaN(d.getTime())) return at;
  const pad = (n: number, w = 2) => String(n).padStart(w, "0");
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

interface Props {
  id: string;
  /** changes whenever the stream reported something of the job: read the lines after the last one */
  tick: number;
}

export function JobLogs({ id, tick }: Props) {
  const [log, setLog] = useState<LogState>(emptyLog);
  const [error, setError] = useState<unknown>(null);
  const [loaded, setLoaded] = useState(false);
  const state = useRef(emptyLog);
  const busy = useRef(false);
  const again = useRef(false);
  const box = useRef<HTMLDivElement>(null);
  const stick = useRef(true);

  // One read at a time; a tick during a read reads once more after it.
  const readMore = useCallback(async () => {
    if (busy.current) {
      again.current = true;
      return;
    }
    busy.current = true;
    try {
      do {
        again.current = false;
        for (let pages = 0; pages < 20; pages++) {
          const page = await api.jobLogs(id, state.current.next);
          state.current = appendLog(state.current, page);
          if (page.lines.length < 1000) break;
        }
      } while (again.current);
      setLog(state.current);
      setError(null);
    } catch (e) {
      setLog(state.current);
      setError(e);
    } finally {
      busy.current = false;
      setLoaded(true);
    }
  }, [id]);

  useEffect(() => {
    void readMore();
  }, [readMore, tick]);

  // Follow the end while the reader is at it; leave the scroll alone once they scrolled up.
  useLayoutEffect(() => {
    const el = box.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  }, [log]);

  const shown = log.lines.length;
  return (
    <section aria-labelledby="logs" className="logs-section" data-testid="job-logs" data-lines={shown} data-dropped={log.dropped}>
      <h2 id="logs">Logs</h2>
      <p className="muted small" data-testid="job-logs-summary">
        {!loaded ? "Loading…" : shown === 0 && log.dropped === 0 ? "No lines yet: what the handler logs (ctx.log) shows here as it runs." : <>{num(shown + log.trimmed)} line{shown + log.trimmed === 1 ? "" : "s"}</>}
        {log.dropped > 0 ? (
          <span data-testid="job-logs-dropped">
            {" "}· {num(log.dropped)} older line{log.dropped === 1 ? "" : "s"} dropped (a job keeps its last lines up to a cap)
          </span>
        ) : null}
        {log.trimmed > 0 ? <span> · the first {num(log.trimmed)} read are no longer shown</span> : null}
      </p>
      {error ? <p className="error-text" data-testid="job-logs-error">The lines could not be read: {describeError(error)}</p> : null}
      {shown > 0 ? (
        // The scrolling region is the log (keyboard-scrollable); the lines are a list in it.
        <div
          className="log-box"
          role="log"
          aria-label="Job log lines"
          tabIndex={0}
          ref={box}
          onScroll={(e) => {
            const el = e.currentTarget;
            stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 24;
          }}
        >
          <ol className="log-lines">
          {log.lines.map((l) => (
            <li key={l.seq} className={`log-line log-${l.level}`} data-seq={l.seq} data-level={l.level}>
              <time dateTime={l.at} title={l.at}>{clock(l.at)}</time>
              <span className="log-level">{l.level}</span>
              <span className="log-message">{l.message}</span>
              {l.fields
                ? Object.keys(l.fields).sort().map((k) => (
                  <span key={k} className="log-field"><span className="log-key">{k}</span>={l.fields![k]}</span>
                ))
                : null}
              <span className="log-attempt muted" title={`attempt ${l.attempt}`}>#{l.attempt}</span>
            </li>
          ))}
          </ol>
        </div>
      ) : null}
    </section>
  );
}
