// What a bulk action says while it runs (the stream's bulk messages for its
// request id) and when it is done (the answer's counts).

import type { BulkAction, BulkResult } from "../api/types";
import { useLive } from "../live/store";
import { num } from "../lib/format";
import type { BulkOutcome } from "../lib/bulk";
import { describeError } from "../api/client";

const done: Record<BulkAction, string> = { retry: "Retried", cancel: "Cancelled", delete: "Deleted", move: "Moved" };
const doing: Record<BulkAction, string> = { retry: "Retrying", cancel: "Cancelling", delete: "Deleting", move: "Moving" };

const jobs = (n: number) => `${num(n)} job${n === 1 ? "" : "s"}`;

/** describeBulk says in words what a bulk action did. */
export function describeBulk(r: Pick<BulkOutcome, "action" | "matched" | "count"> & { failed?: BulkOutcome["failed"] }): string {
  let s = `${done[r.action]} ${jobs(r.count)}.`;
  const skipped = r.matched - r.count;
  if (skipped > 0) s += ` ${num(skipped)} of the ${num(r.matched)} selected ${skipped === 1 ? "was" : "were"} skipped: no longer in a state the action applies to.`;
  if (r.failed?.length) {
    const n = r.failed.reduce((a, f) => a + f.ids, 0);
    s += ` ${jobs(n)} of queue ${r.failed.map((f) => f.queue).join(", ")} could not be: ${describeError(r.failed[0].error)}`;
  }
  return s;
}

/** describeProgress says how far a running bulk action is. */
export function describeProgress(action: BulkAction, p: BulkResult | undefined): string {
  if (!p) return `${doing[action]}…`;
  return `${doing[action]}… ${num(p.count)} done, ${num(p.matched)} selected so far${p.scanned ? ` (${num(p.scanned)} read)` : ""}.`;
}

/** BulkProgress follows a running bulk action by its request id. */
export function BulkProgress({ requestId, action }: { requestId: string; action: BulkAction }) {
  const p = useLive((s) => s.bulks.get(requestId));
  return (
    <div className="banner info" role="status" data-testid="bulk-progress">
      {describeProgress(action, p)}
      {p && p.matched > 0 ? <progress max={p.matched} value={p.count} aria-label="Bulk action progress" /> : null}
    </div>
  );
}
