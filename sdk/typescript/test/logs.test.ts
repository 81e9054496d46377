// Per-job logs against a real API (SUNDIAL_URL): ctx.log in a handler, sent
// while it runs and before its outcome, read back with client.logs.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Worker, type JobLogger, type WorkerOptions } from '../src/index.js';
import { API_KEY, client, eventually, memoryLogger, noApi, Proxy, queueName, running, URL_ } from './support.js';

function worker(q: string, opts: WorkerOptions = {}): Worker {
  return new Worker({ url: URL_, apiKey: API_KEY, queues: [q], waitSeconds: 5, shutdownTimeoutMs: 5000, handleSignals: false, logger: memoryLogger(), ...opts });
}

describe('job logs against the API', { skip: noApi }, () => {
  const c = client();

  test("a handler's log lines reach the job, the last ones before its outcome", async () => {
    const q = queueName('logs');
    const job = await c.submit({ queue: q, type: 'chatty' });
    let goOn: () => void = () => {};
    const gate = new Promise<void>((r) => {
      goOn = r;
    });
    const w = worker(q);
    w.handle('chatty', async (ctx) => {
      ctx.log.info('starting', { order: 42, ok: true });
      await gate; // sent while the handler runs (every 200 ms), not only at its end
      ctx.log.debug('details');
      ctx.log.warn('slow', { ms: '350' });
      ctx.log.error('last words');
      return 'done';
    });
    const [first, done] = await running(w, async () => {
      const first = await eventually('the first line while the handler runs', async () => {
        const lines = await c.logs(job.id);
        return lines.length > 0 ? lines : undefined;
      });
      assert.equal((await c.get(job.id)).state, 'active');
      goOn();
      return [first, await c.wait(job.id, { timeoutMs: 30_000 })] as const;
    });
    assert.equal(first[0]!.message, 'starting');
    const lines = await c.logs(job.id);
    assert.equal(done.state, 'succeeded');
    assert.deepEqual(
      lines.map((l) => [l.level, l.message]),
      [
        ['info', 'starting'],
        ['debug', 'details'],
        ['warn', 'slow'],
        ['error', 'last words'],
      ],
    );
    assert.deepEqual(lines[0]!.fields, { order: '42', ok: 'true' });
    assert.deepEqual(lines.map((l) => l.attempt), [1, 1, 1, 1]);
    assert.deepEqual(lines.map((l) => l.seq), [...lines.map((l) => l.seq)].sort((a, b) => a - b));
    assert.equal((await c.get(job.id)).logs?.lines, 4);
    const page = await c.logsPage(job.id, { after: lines[1]!.seq, limit: 1 });
    assert.deepEqual(page.lines.map((l) => l.message), ['slow']);
    assert.equal(page.next_after, lines[2]!.seq);
    assert.equal(page.dropped, 0);
  });

  test('many lines go in calls of 100', async () => {
    const q = queueName('logmany');
    const job = await c.submit({ queue: q, type: 'chatty' });
    const w = worker(q);
    w.handle('chatty', (ctx) => {
      for (let i = 0; i < 250; i++) ctx.log.info(`line ${i}`);
    });
    assert.equal((await running(w, () => c.wait(job.id, { timeoutMs: 30_000 }))).state, 'succeeded');
    assert.deepEqual((await c.logs(job.id)).map((l) => l.message), Array.from({ length: 250 }, (_, i) => `line ${i}`));
  });

  test('a refused log call drops the lines; the job goes on', async () => {
    const q = queueName('log409');
    const proxy = await new Proxy(URL_, () => false, false, async (_m, path) => (path.split('?')[0]!.endsWith('/logs') ? 409 : undefined)).start();
    try {
      const job = await c.submit({ queue: q, type: 'chatty' });
      let log: JobLogger | undefined;
      const w = worker(q, { url: proxy.url });
      w.handle('chatty', async (ctx) => {
        log = ctx.log;
        ctx.log.info('one');
        await eventually('the refused call', () => proxy.seen.get('logs'), 10_000);
        ctx.log.info('two');
        return 'ok';
      });
      const done = await running(w, () => c.wait(job.id, { timeoutMs: 30_000 }));
      assert.deepEqual([done.state, done.result], ['succeeded', 'ok']);
      assert.equal(proxy.seen.get('logs'), 1);
      assert.equal(log?.dropped, 2);
      assert.deepEqual(await c.logs(job.id), []);
    } finally {
      await proxy.close();
    }
  });
});
