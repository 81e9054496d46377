// Small shared pieces: state badges, error banners, JSON blocks, scrolling
// table frames, the confirmation dialog.

import { useEffect, useId, useRef, useState, type ReactNode, type RefObject } from "react";
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

/**
 * useOverflow reports whether the element scrolls: its content is wider or
 * taller than its box. It follows the element's size and its children's
 * (rows arriving, a narrower window).
 */
export function useOverflow<T extends HTMLElement>(): [RefObject<T | null>, boolean] {
  const ref = useRef<T>(null);
  const [overflows, setOverflows] = useState(false);
  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    const measure = () => setOverflows(el.scrollWidth > el.clientWidth + 1 || el.scrollHeight > el.clientHeight + 1);
    measure();
    if (typeof ResizeObserver === "undefined") return;
    const ro = new ResizeObserver(measure);
    ro.observe(el);
    for (const c of Array.from(el.children)) ro.observe(c);
    const mo = new MutationObserver(() => {
      for (const c of Array.from(el.children)) ro.observe(c);
      measure();
    });
    mo.observe(el, { childList: true, subtree: true, characterData: true });
    return () => {
      ro.disconnect();
      mo.disconnect();
    };
  }, []);
  return [ref, overflows];
}

/**
 * scrollRegion is what makes a box that scrolls reachable by keyboard: a
 * tab stop (arrow keys then scroll it) with a role and a name. A box that
 * does not scroll gets none of it, so it adds no stop.
 */
function scrollRegion(overflows: boolean, label: string) {
  return overflows ? { tabIndex: 0, role: "region", "aria-label": label } : {};
}

/** TableWrap is the frame of a wide table, scrolling sideways on a narrow screen. */
export function TableWrap({ label, children }: { label: string; children: ReactNode }) {
  const [ref, overflows] = useOverflow<HTMLDivElement>();
  return (
    <div className="table-wrap" ref={ref} {...scrollRegion(overflows, label)}>
      {children}
    </div>
  );
}

/** Pre is a preformatted block that scrolls when long (at most 320 px high). */
export function Pre({ label, className, children }: { label: string; className?: string; children: ReactNode }) {
  const [ref, overflows] = useOverflow<HTMLPreElement>();
  return (
    <pre className={className ? `json ${className}` : "json"} ref={ref} {...scrollRegion(overflows, label)}>
      {children}
    </pre>
  );
}

export function JsonBlock({ value, label }: { value: unknown; label: string }) {
  if (value === undefined || value === null) return <p className="muted">none</p>;
  return <Pre label={label}>{json(value)}</Pre>;
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
  /** disabled: nothing to confirm (yet) */
  disabled?: boolean;
  onConfirm: () => void;
  onCancel: () => void;
}

/** Confirm asks before a destructive action, in a modal dialog. */
export function Confirm({ open, title, body, confirmLabel, danger, busy, disabled, onConfirm, onCancel }: ConfirmProps) {
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
        <button type="button" className={danger ? "danger" : "primary"} onClick={onConfirm} disabled={busy || disabled} autoFocus>
          {busy ? "Working…" : confirmLabel}
        </button>
      </div>
    </dialog>
  );
}
