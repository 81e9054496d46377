// Helpers for the charts' series.

/**
 * The indices of values a line cannot show: present, with no present
 * neighbour (a minute with failures between minutes with no attempts).
 * The chart marks them with a dot.
 */
export function isolatedPoints(values: (number | null | undefined)[]): number[] {
  const out: number[] = [];
  for (let i = 0; i < values.length; i++) {
    if (values[i] == null) continue;
    if (values[i - 1] == null && values[i + 1] == null) out.push(i);
  }
  return out;
}
