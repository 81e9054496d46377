// runBulk applies an action to many ids, a few at a time, and says how it went.

export interface BulkResult {
  ok: number;
  failed: { id: string; error: unknown }[];
}

export async function runBulk(ids: string[], action: (id: string) => Promise<unknown>, concurrency = 8): Promise<BulkResult> {
  const result: BulkResult = { ok: 0, failed: [] };
  let next = 0;
  async function lane() {
    while (next < ids.length) {
      const id = ids[next++];
      try {
        await action(id);
        result.ok++;
      } catch (error) {
        result.failed.push({ id, error });
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, ids.length) }, lane));
  return result;
}
