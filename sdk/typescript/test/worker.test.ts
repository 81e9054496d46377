// The worker against a real API (SUNDIAL_URL, SUNDIAL_LEASE_TTL=1s).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { NoRetry, Worker, type JobContext, type WorkerOptions } from '../src/index.js';
import { API_KEY, client, eventually, memoryLogger, noApi, Proxy, queueName, running, URL_ } from './support.js';

const noBackoff = { base_seconds: 0, max_seconds: 0 };

function worker(q: string, opts: WorkerOptions = {}): Worker {
  return new Worker({ url: URL_, apiKey: API_KEY, queues: [q], waitSeconds: 5, shutdownTimeoutMs: 5000, handleSignals: false, logger: memoryLogger(), ...opts });
}

const sleepMs = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('worker against the API', { skip: noApi }, () => {
  const c = client();

  test('concurrency 4 runs 20 jobs', async () => {
    const q = queueName('conc');
    let now = 0;
    let most = 0;
    const jobs = await c.submitBatch(Array.from({ length: 20 }, (_, i) => ({ queue: q, type: 'double', payload: { i } })));
    const w = worker(q, { concurrency: 4 });
    w.handle<{ i: number }>('double', async (ctx) => {
      most = Math.max(most, ++now);
      await sleepMs(250);
      now--;
      return ctx.payload.i * 2;
    });
    const done = await running(w, () => Promise.all(jobs.map((j) => c.wait(j.id, { timeoutMs: 30_000 }))));
    assert.deepEqual(done.map((j) => [j.state, j.attempt, j.result]), jobs.map((_, i) => ['succeeded', 1, i * 2]));
    assert.equal(most, 4);
  });

  test('a handler error is retried, then the job succeeds; NoRetry ends it dead', async () => {
    const q = queueName('retry');
    const job = await c.submit({ queue: q, type: 'flaky', backoff: noBackoff });
    const bad = await c.submit({ queue: q, type: 'broken', max_attempts: 5 });
    const w = worker(q);
    w.handle('flaky', (ctx) => {
      if (ctx.attempt === 1) throw new Error('smtp timed out');
      return 'sent';
    });
    w.handle('broken', () => {
      throw new NoRetry('bad address');
    });
    const [done, dead] = await running(w, () => Promise.all([c.wait(job.id, { timeoutMs: 30_000 }), c.wait(bad.id, { timeoutMs: 30_000 })]));
    assert.deepEqual([done.state, done.attempt, done.result], ['succeeded', 2, 'sent']);
    assert.deepEqual([dead.state, dead.attempt, dead.last_error], ['dead', 1, 'bad address']);
  });

  test('progress is visible on the job', async () => {
    const q = queueName('progress');
    let release: () => void = () => {};
    const released = new Promise<void>((r) => {
      release = r;
    });
    const job = await c.submit({ queue: q, type: 'copy' });
    const w = worker(q);
    w.handle('copy', async (ctx) => {
      await ctx.progress(40, 'copied 4 of 10 files');
      await released;
      return ctx.token;
    });
    const done = await running(w, async () => {
      const seen = await eventually('progress on the job', async () => (await c.get(job.id)).progress);
      assert.deepEqual([seen.percent, seen.message], [40, 'copied 4 of 10 files']);
      assert.equal((await c.get(job.id)).state, 'active');
      release();
      return c.wait(job.id, { timeoutMs: 20_000 });
    });
    assert.equal(done.state, 'succeeded');
    assert.ok(done.result); // the handler saw its fencing token
  });

  test('a refused heartbeat signals the handler', async () => {
    const q = queueName('lost');
    const signalled = new Map<string, number>();
    // cancelled while it runs: the next heartbeat answers 409
    const job = await c.submit({ queue: q, type: 'hold' });
    // past its timeout (1 s, + 0.2 s grace): Redis refuses the renewal
    const slow = await c.submit({ queue: q, type: 'hold', timeout_seconds: 1, max_attempts: 1 });
    const w = worker(q, { concurrency: 2 });
    w.handle('hold', async (ctx: JobContext) => {
      const t0 = performance.now();
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 20_000);
        ctx.signal.addEventListener('abort', () => {
          clearTimeout(timer);
          resolve();
        });
      });
      if (ctx.signal.aborted) signalled.set(ctx.id, performance.now() - t0);
      return 'late';
    });
    await running(w, async () => {
      await eventually('the job to start', async () => (await c.get(job.id)).state === 'active');
      await c.cancel(job.id);
      await eventually('the handler to be signalled', () => signalled.has(job.id), 10_000);
      await eventually("the slow job's handler to be signalled", () => signalled.has(slow.id), 10_000);
    });
    assert.ok(signalled.get(slow.id)! < 5000);
    // nothing was reported: the cancel stands, the late result is not stored
    const got = await c.get(job.id);
    assert.equal(got.state, 'cancelled');
    assert.equal(got.result, undefined);
    assert.notEqual((await c.get(slow.id)).result, 'late');
  });

  // The connection breaks before the complete reaches the API, then after
  // the API wrote it (the repeat is answered 409): either way the job ends
  // succeeded with attempt 1, and no fail is sent.
  for (const afterForwarding of [false, true]) {
    test(`complete is retried after a broken connection (${afterForwarding ? 'after' : 'before'} the API got it)`, async () => {
      const q = queueName('complete');
      let dropped = false;
      const proxy = await new Proxy(
        URL_,
        (_method, path) => {
          if (path.endsWith('/complete') && !dropped) return (dropped = true);
          return false;
        },
        afterForwarding,
      ).start();
      try {
        const job = await c.submit({ queue: q, type: 'pay', payload: { amount: 5 }, backoff: noBackoff });
        const w = worker(q, { url: proxy.url });
        w.handle<{ amount: number }>('pay', (ctx) => ({ paid: ctx.payload.amount }));
        const done = await running(w, async () => {
          const j = await c.wait(job.id, { timeoutMs: 30_000 });
          await eventually('the repeated complete', () => proxy.seen.get('complete') === 2);
          return j;
        });
        assert.deepEqual(proxy.dropped, [`/v1/jobs/${job.id}/complete`]);
        assert.deepEqual([done.state, done.attempt, done.result], ['succeeded', 1, { paid: 5 }]);
        assert.equal(proxy.seen.get('complete'), 2);
        assert.equal(proxy.seen.has('fail'), false);
      } finally {
        await proxy.close();
      }
    });
  }
});

describe('shutdown', { skip: noApi }, () => {
  const c = client();

  function startWorker(q: string, shutdownTimeoutMs: number) {
    const script = fileURLToPath(new URL('./worker-proc.js', import.meta.url));
    const proc = spawn(process.execPath, [script], { env: { ...process.env, SUNDIAL_QUEUES: q, SHUTDOWN_TIMEOUT_MS: String(shutdownTimeoutMs) } });
    let out = '';
    proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
    proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
    return { proc, exited, output: () => out };
  }

  async function exitWithin<T>(p: Promise<T>, ms: number, what: () => string): Promise<T> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no exit within ${ms} ms:\n${what()}`)), ms);
    });
    try {
      return await Promise.race([p, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  test('SIGTERM lets a running job finish', async () => {
    const q = queueName('term-ok');
    const w = startWorker(q, 10_000);
    try {
      const job = await c.submit({ queue: q, type: 'slow', payload: { seconds: 1.5 } });
      await eventually('the job to start', async () => (await c.get(job.id)).state === 'active');
      w.proc.kill('SIGTERM');
      const code = await exitWithin(w.exited, 10_000, w.output);
      assert.equal(code, 0, w.output());
      const done = await c.get(job.id);
      assert.deepEqual([done.state, done.attempt], ['succeeded', 1], w.output());
      assert.match(w.output(), /finished/);
    } finally {
      w.proc.kill('SIGKILL');
    }
  });

  test('SIGTERM exits within its deadline', async () => {
    const q = queueName('term-late');
    const w = startWorker(q, 1000);
    try {
      const job = await c.submit({ queue: q, type: 'slow', payload: { seconds: 60 }, max_attempts: 1 });
      await eventually('the job to start', async () => (await c.get(job.id)).state === 'active');
      const sent = performance.now();
      w.proc.kill('SIGTERM');
      const code = await exitWithin(w.exited, 1000 + 2500, w.output);
      assert.equal(code, 0, w.output());
      assert.ok(performance.now() - sent < 3500);
      assert.match(w.output(), /giving it back/);
      // nothing was reported; the lease runs out and the poller ends the attempt
      const done = await c.wait(job.id, { timeoutMs: 20_000 });
      assert.equal(done.state, 'dead', w.output());
      assert.equal(done.result, undefined);
    } finally {
      w.proc.kill('SIGKILL');
    }
  });
});
