// Schedules: next runs and last job, enable or disable, trigger now, edit,
// delete (confirmed).

import { useState } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { Link, useLocation } from "wouter";
import { api, describeError } from "../api/client";
import type { Schedule } from "../api/types";
import { Confirm, Empty, ErrorBanner, TableWrap } from "../components/ui";
import { ago, shortId, when } from "../lib/format";

export function timing(s: Schedule): string {
  if (s.cron) return s.cron;
  const n = s.every_seconds ?? 0;
  if (n % 86400 === 0) return `every ${n / 86400} d`;
  if (n % 3600 === 0) return `every ${n / 3600} h`;
  if (n % 60 === 0) return `every ${n / 60} min`;
  return `every ${n} s`;
}

export function Schedules() {
  const qc = useQueryClient();
  const [, navigate] = useLocation();
  const list = useQuery({ queryKey: ["schedules"], queryFn: api.schedules, refetchInterval: 5_000 });
  const [deleting, setDeleting] = useState<string | null>(null);
  const [note, setNote] = useState<{ ok: boolean; text: ReactNodeLike } | null>(null);
  const done = () => qc.invalidateQueries({ queryKey: ["schedules"] });
  const toggle = useMutation({
    mutationFn: (s: Schedule) => api.patchSchedule(s.id, { enabled: !(s.enabled ?? true) }),
    onSettled: done,
    onError: (e) => setNote({ ok: false, text: describeError(e) }),
  });
  const trigger = useMutation({
    mutationFn: (id: string) => api.triggerSchedule(id),
    onSuccess: (j) => setNote({ ok: true, text: <>Submitted job <Link href={`/jobs/${j.id}`} className="mono">{j.id}</Link>.</> }),
    onError: (e) => setNote({ ok: false, text: describeError(e) }),
  });
  const del = useMutation({
    mutationFn: (id: string) => api.deleteSchedule(id),
    onSettled: () => {
      setDeleting(null);
      done();
    },
    onError: (e) => setNote({ ok: false, text: describeError(e) }),
  });
  const schedules = list.data?.schedules ?? [];
  return (
    <>
      <div className="page-head">
        <h1>Schedules</h1>
        <button type="button" className="primary" onClick={() => navigate("/schedules/new")}>New schedule</button>
      </div>
      <ErrorBanner error={list.error} />
      {note ? (
        <div className={note.ok ? "banner ok" : "banner error"} role="status">
          {note.text} <button type="button" className="link" onClick={() => setNote(null)}>Dismiss</button>
        </div>
      ) : null}
      {schedules.length === 0 && !list.isLoading ? (
        <Empty>No schedules. <Link href="/schedules/new">Create one</Link> to submit a job again and again.</Empty>
      ) : (
        <TableWrap label="Schedules">
          <table className="grid" aria-label="Schedules">
            <thead>
              <tr>
                <th scope="col">id</th>
                <th scope="col">timing</th>
                <th scope="col">job</th>
                <th scope="col">next run</th>
                <th scope="col">last run</th>
                <th scope="col">last job</th>
                <th scope="col">enabled</th>
                <th scope="col"><span className="sr-only">actions</span></th>
              </tr>
            </thead>
            <tbody>
              {schedules.map((s) => {
                const enabled = s.enabled ?? true;
                return (
                  <tr key={s.id} data-schedule={s.id} className={enabled ? "" : "disabled"}>
                    <th scope="row" className="mono"><Link href={`/schedules/${s.id}/edit`}>{s.id}</Link></th>
                    <td><span className="mono">{timing(s)}</span>{s.timezone && s.timezone !== "UTC" ? <span className="muted"> {s.timezone}</span> : null}</td>
                    <td><span className="mono">{s.job.type}</span> <span className="muted">→ {s.job.queue || "default"}</span></td>
                    <td title={s.next_run_at ?? ""}>{enabled && s.next_run_at ? <>{when(s.next_run_at)} <span className="muted">({ago(s.next_run_at)})</span></> : "–"}</td>
                    <td title={s.last_run_at ?? ""}>{ago(s.last_run_at)}</td>
                    <td>{s.last_job_id ? <Link href={`/jobs/${s.last_job_id}`} className="mono">{shortId(s.last_job_id)}</Link> : "–"}</td>
                    <td>
                      <label className="switch">
                        <input
                          type="checkbox"
                          role="switch"
                          checked={enabled}
                          onChange={() => toggle.mutate(s)}
                          aria-label={`Schedule ${s.id} enabled`}
                        />
                        <span>{enabled ? "on" : "off"}</span>
                      </label>
                    </td>
                    <td className="actions">
                      <button type="button" className="small" onClick={() => trigger.mutate(s.id)} aria-label={`Trigger now: ${s.id}`}>Trigger now</button>
                      <button type="button" className="small" onClick={() => navigate(`/schedules/${s.id}/edit`)} aria-label={`Edit ${s.id}`}>Edit</button>
                      <button type="button" className="small danger-outline" onClick={() => setDeleting(s.id)} aria-label={`Delete ${s.id}`}>Delete</button>
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </TableWrap>
      )}
      <Confirm
        open={deleting !== null}
        title="Delete schedule?"
        body={<p>Delete schedule <strong className="mono">{deleting}</strong>? It stops firing at once; jobs it already submitted stay.</p>}
        confirmLabel="Delete"
        danger
        busy={del.isPending}
        onConfirm={() => deleting && del.mutate(deleting)}
        onCancel={() => setDeleting(null)}
      />
    </>
  );
}

type ReactNodeLike = React.ReactNode;
