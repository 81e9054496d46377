// Small shared pieces: state badges, error banners, JSON blocks, the
// confirmation dialog.

import { useEffect, useId, useRef, type ReactNode } from "react";
import type { JobState } from "../api/types";
import { describeError } from "../api/client";
import { json } from "../lib/format";

export function StateBadge({ state }: { state: JobState | string }) {
  return <span className={`badge state-${state}`}>{state}</span>;
}

export function ErrorBanner({ error, title }: { error: unknown; title?: string }) {
  if (!error) return null;
  return (
    <div className="banner error" role="alert">
      {title ? <strong>{title}: </strong> : null}
      {describeError(error)}
    </div>
  );
}

export function JsonBlock({ value, label }: { value: unknown; label: string }) {
  if (value === undefined || value === null) return <p className="muted">none</p>;
  return (
    <pre className="json" aria-label={label} tabIndex={0}>
      {json(value)}
    </pre>
  );
}

export function Stat({ label, value, hint, tone }: { label: string; value: ReactNode; hint?: string; tone?: "bad" | "warn" | "good" }) {
  return (
    <div className={`stat ${tone ?? ""}`} title={hint}>
      <div className="stat-value">{value}</div>
      <div className="stat-label">{label}</div>
    </div>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <div className="empty">{children}</div>;
}

export interface ConfirmProps {
  open: boolean;
  title: string;
  body: ReactNode;
  confirmLabel: string;
  danger?: boolean;
  busy?: boolean;
  onConfirm: () => void;
  onCancel: () => void;
}

/** Confirm asks before a destructive action, in a modal dialog. */
export function Confirm({ open, title, body, confirmLabel, danger, busy, onConfirm, onCancel }: ConfirmProps) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (open && !d.open) {
      if (typeof d.showModal === "function") d.showModal();
      else d.setAttribute("open", "");
    } else if (!open && d.open) {
      if (typeof d.close === "function") d.close();
      else d.removeAttribute("open");
    }
  }, [open]);
  return (
    <dialog ref={ref} className="dialog" aria-labelledby={titleId} onCancel={(e) => { e.preventDefault(); onCancel(); }}>
      <h2 id={titleId}>{title}</h2>
      <div className="dialog-body">{body}</div>
      <div className="dialog-actions">
        <button type="button" onClick={onCancel}>Cancel</button>
        <button type="button" className={danger ? "danger" : "primary"} onClick={onConfirm} disabled={busy} autoFocus>
          {busy ? "Working…" : confirmLabel}
        </button>
      </div>
    </dialog>
  );
}
