// A virtualized job table (TanStack Virtual): thousands of rows cost the
// DOM of the few on screen. Rows show the stream's latest state of each job,
// and can be selected for bulk actions.

import { useRef } from "react";
import { useVirtualizer } from "@tanstack/react-virtual";
import { Link } from "wouter";
import type { Job } from "../api/types";
import { useLive } from "../live/store";
import type { LiveData } from "../live/reduce";
import { StateBadge } from "./ui";
import { ago } from "../lib/format";

/** rowState is the state to show: the stream's, when it is newer than the row. */
export function rowState(j: Job, live: LiveData): Job["state"] {
  const e = live.jobs.get(j.id);
  if (!e) return j.state;
  const known = Math.max(Date.parse(j.created_at) || 0, Date.parse(j.started_at ?? "") || 0, Date.parse(j.finished_at ?? "") || 0);
  return Date.parse(e.at) >= known ? e.state : j.state;
}

interface Props {
  jobs: Job[];
  label: string;
  /** selected and onSelect: rows can be selected for bulk actions (a check column); without, they cannot. */
  selected?: Set<string>;
  onSelect?: (next: Set<string>) => void;
  showError?: boolean;
  footer?: React.ReactNode;
}

const rowHeight = 40;

const noneSelected = new Set<string>();

export function JobTable({ jobs, label, selected = noneSelected, onSelect, showError, footer }: Props) {
  const scroller = useRef<HTMLDivElement>(null);
  const live = useLive((s) => s.data);
  // The app is not built with React Compiler, so nothing memoizes this
  // component: the warning that the compiler would skip it does not apply.
  // eslint-disable-next-line react-hooks/incompatible-library
  const v = useVirtualizer({ count: jobs.length, getScrollElement: () => scroller.current, estimateSize: () => rowHeight, overscan: 10 });
  const allSelected = jobs.length > 0 && jobs.every((j) => selected.has(j.id));
  const toggle = (id: string) => {
    const next = new Set(selected);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    onSelect?.(next);
  };
  // The footer ("Load more") is below the table, not in it: a table holds rows only.
  return (
    <div className={showError ? "vtable with-error" : "vtable"}>
      <div role="table" aria-label={label} aria-rowcount={jobs.length + 1}>
        <div className="vrow vhead" role="row">
          <span role="columnheader" className="c-check">
            {onSelect ? (
              <input
                type="checkbox"
                aria-label="Select all loaded rows"
                checked={allSelected}
                onChange={() => onSelect(allSelected ? new Set() : new Set(jobs.map((j) => j.id)))}
              />
            ) : null}
          </span>
          <span role="columnheader" className="c-id">id</span>
          <span role="columnheader" className="c-state">state</span>
          <span role="columnheader" className="c-queue">queue</span>
          <span role="columnheader" className="c-type">type</span>
          <span role="columnheader" className="c-attempt">attempt</span>
          <span role="columnheader" className="c-time">created</span>
          {showError ? <span role="columnheader" className="c-error">last error</span> : null}
        </div>
        <div className="vbody" ref={scroller}>
          <div style={{ height: v.getTotalSize(), position: "relative" }}>
            {v.getVirtualItems().map((item) => {
              const j = jobs[item.index];
              const state = rowState(j, live);
              return (
                <div
                  key={j.id}
                  className={selected.has(j.id) ? "vrow selected" : "vrow"}
                  role="row"
                  aria-rowindex={item.index + 2}
                  aria-selected={onSelect ? selected.has(j.id) : undefined}
                  data-job={j.id}
                  style={{ position: "absolute", top: 0, left: 0, right: 0, height: rowHeight, transform: `translateY(${item.start}px)` }}
                >
                  <span role="cell" className="c-check">
                    {onSelect ? <input type="checkbox" aria-label={`Select job ${j.id}`} checked={selected.has(j.id)} onChange={() => toggle(j.id)} /> : null}
                  </span>
                  <span role="cell" className="c-id mono"><Link href={`/jobs/${j.id}`}>{j.id}</Link></span>
                  <span role="cell" className="c-state"><StateBadge state={state} /></span>
                  <span role="cell" className="c-queue">
                    {j.queue}
                    {j.group ? <span className="chip group-chip" title={`group ${j.group}`}>{j.group}</span> : null}
                  </span>
                  <span role="cell" className="c-type mono">
                    {j.type}
                    {j.tags?.length ? (
                      <span className="row-tags" title={`tags: ${j.tags.join(", ")}`}>
                        {j.tags.slice(0, 2).map((t) => <span key={t} className="chip tag-chip">{t}</span>)}
                        {j.tags.length > 2 ? <span className="muted">+{j.tags.length - 2}</span> : null}
                      </span>
                    ) : null}
                  </span>
                  <span role="cell" className="c-attempt">{j.attempt}/{j.max_attempts}</span>
                  <span role="cell" className="c-time" title={j.created_at}>{ago(j.created_at)}</span>
                  {showError ? <span role="cell" className="c-error" title={j.last_error}>{j.last_error}</span> : null}
                </div>
              );
            })}
          </div>
        </div>
      </div>
      {footer}
    </div>
  );
}
