// Form checks that run before anything is sent; the API checks again.

export function parseJSON(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  if (text.trim() === "") return { ok: true, value: undefined };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (e) {
    return { ok: false, error: e instanceof Error ? e.message : "invalid JSON" };
  }
}

export const queueRe = /^[a-z0-9_-]{1,64}$/;
export const typeRe = /^[A-Za-z0-9_.:-]{1,128}$/;
export const scheduleIdRe = /^[A-Za-z0-9_.:-]{1,128}$/;

/** intIn parses an integer within [lo, hi], or says what is wrong. */
export function intIn(text: string, lo: number, hi: number, name: string): { value?: number; error?: string } {
  if (text.trim() === "") return {};
  const n = Number(text);
  if (!Number.isInteger(n)) return { error: `${name} must be a whole number` };
  if (n < lo || n > hi) return { error: `${name} must be between ${lo} and ${hi}` };
  return { value: n };
}
