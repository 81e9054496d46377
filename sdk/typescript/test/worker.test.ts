// The worker against a real API (SUNDIAL_URL, SUNDIAL_LEASE_TTL=1s; SUNDIAL_LONG_LEASE_URL, 5s).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Cancel, ConflictError, NoRetry, RetryAfter, Snooze, Worker, type Job, type JobContext, type WorkerOptions } from '../src/index.js';
import { API_KEY, client, eventually, LONG_LEASE_URL, memoryLogger, noApi, noLongLeaseApi, Proxy, queueName, running, URL_ } from './support.js';

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

  test('handler outcomes: Snooze gives the attempt back, Cancel ends it cancelled, RetryAfter picks the delay', async () => {
    const q = queueName('outcomes');
    const nap = await c.submit({ queue: q, type: 'napper', max_attempts: 1 });
    const gone = await c.submit({ queue: q, type: 'canceller' });
    const slow = await c.submit({ queue: q, type: 'limited', backoff: { base_seconds: 3600, max_seconds: 3600 } });
    const w = worker(q);
    w.handle('napper', (ctx) => {
      if (ctx.attempt === 1) throw new Snooze(0, 'not yet');
      return ctx.attempt;
    });
    w.handle('canceller', () => {
      throw new Cancel('order deleted');
    });
    w.handle('limited', (ctx) => {
      if (ctx.attempt === 1) throw new RetryAfter(0.2, '429');
      return 'ok';
    });
    const [a, b, d] = await running(w, () => Promise.all([nap, gone, slow].map((j) => c.wait(j.id, { timeoutMs: 30_000 }))));
    // Snoozed once with max_attempts 1: the attempt was given back.
    assert.deepEqual([a.state, a.attempt, a.max_attempts, a.result], ['succeeded', 2, 2, 2]);
    assert.deepEqual([b.state, b.last_error], ['cancelled', 'order deleted']);
    // Retried after 0.2 s, not after its hour of backoff.
    assert.deepEqual([d.state, d.attempt, d.result], ['succeeded', 2, 'ok']);
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

  test('concurrency 8 drains 2,000 jobs, each run once', async () => {
    const q = queueName('drain');
    const n = 2000;
    const runs = new Map<string, number>();
    const ids: string[] = [];
    for (let start = 0; start < n; start += 1000) {
      const jobs = await c.submitBatch(Array.from({ length: 1000 }, (_, i) => ({ queue: q, type: 'noop', payload: { i: start + i } })));
      ids.push(...jobs.map((j) => j.id));
    }
    const w = worker(q, { concurrency: 8 });
    w.handle('noop', (ctx) => {
      runs.set(ctx.id, (runs.get(ctx.id) ?? 0) + 1);
      return null;
    });
    const began = performance.now();
    const took = await running(w, async () => {
      await eventually('all jobs to succeed', async () => (await c.queue(q)).succeeded_total >= n, 120_000);
      return (performance.now() - began) / 1000;
    });
    const stats = await c.queue(q);
    assert.deepEqual([stats.succeeded_total, stats.failed_total, stats.active, stats.dead], [n, 0, 0, 0]);
    assert.equal(runs.size, n);
    assert.deepEqual([...runs.keys()].sort(), [...ids].sort());
    assert.deepEqual([...runs].filter(([, v]) => v !== 1), []);
    console.log(`drained ${n} jobs at concurrency 8 in ${took.toFixed(1)} s (${Math.round(n / took)} jobs/s)`);
  });

  // The first worker's heartbeats never arrive (a proxy drops them): its
  // lease expires, the poller reclaims the job and a second worker runs it
  // under a new token. The first handler is told to stop, its result is
  // never reported, and its token is refused by the API.
  test('a stale token is refused and the handler told', async () => {
    const q = queueName('fence');
    const proxy = await new Proxy(URL_, (_method, path) => path.endsWith('/heartbeat')).start();
    let release: () => void = () => {};
    const hold = new Promise<void>((r) => {
      release = r;
    });
    try {
      const first: { token?: string; reason?: string } = {};
      const second: { token?: string } = {};
      const job = await c.submit({ queue: q, type: 'fenced', backoff: noBackoff, max_attempts: 3 });
      const w1 = worker(q, { url: proxy.url });
      w1.handle('fenced', async (ctx) => {
        first.token = ctx.token;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 20_000);
          ctx.signal.addEventListener('abort', () => {
            clearTimeout(timer);
            resolve();
          });
        });
        if (ctx.signal.aborted) first.reason = (ctx.signal.reason as Error).message;
        await hold; // keep the slot busy: this worker claims nothing more
        return 'stale result';
      });
      const w2 = worker(q);
      w2.handle('fenced', (ctx) => {
        second.token = ctx.token;
        return 'fresh result';
      });
      const done = await running(w1, async () => {
        await eventually('the first handler to be told', () => first.reason, 10_000);
        const j = await running(w2, () => c.wait(job.id, { timeoutMs: 20_000 }));
        for (const [route, body] of [['heartbeat', {}], ['complete', { result: 'stale' }], ['release', {}]] as const) {
          await assert.rejects(
            c.transport.request('POST', `/v1/jobs/${job.id}/${route}`, { body: { ...body, token: first.token }, retries: 0 }),
            ConflictError,
            route,
          );
        }
        release();
        return j;
      });
      assert.deepEqual([done.state, done.attempt, done.result], ['succeeded', 2, 'fresh result']);
      assert.notEqual(first.token, second.token);
      assert.match(first.reason!, /renewed in time/);
      assert.equal(proxy.seen.has('complete'), false); // the stale result was never sent
      assert.equal((await c.get(job.id)).result, 'fresh result');
    } finally {
      release();
      await proxy.close();
    }
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

  function startWorker(q: string, shutdownTimeoutMs: number, concurrency = 2) {
    const script = fileURLToPath(new URL('./worker-proc.js', import.meta.url));
    const proc = spawn(process.execPath, [script], {
      env: { ...process.env, SUNDIAL_QUEUES: q, SHUTDOWN_TIMEOUT_MS: String(shutdownTimeoutMs), CONCURRENCY: String(concurrency) },
    });
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
      assert.match(w.output(), /lease given back/);
      // nothing was reported; the lease was given back: queued again at
      // once, the interrupted attempt not counted (max_attempts 1, not dead)
      const got = await c.get(job.id);
      assert.deepEqual([got.state, got.attempt], ['queued', 0], w.output());
      assert.equal(got.result, undefined);
    } finally {
      w.proc.kill('SIGKILL');
    }
  });

  /** Runs the queue's slow jobs at once on a worker in this process and
   * answers the jobs when all have ended. */
  async function runElsewhere(q: string, ids: string[]): Promise<Job[]> {
    const w = worker(q, { concurrency: 8 });
    w.handle('slow', () => ({ elsewhere: true }));
    return running(w, () => Promise.all(ids.map((id) => c.wait(id, { timeoutMs: 20_000 }))));
  }

  // 6 short jobs finish, 4 long ones are running and 2 more are queued when
  // SIGTERM comes; after the 1 s deadline the 4 are given back, and another
  // worker runs them (and the 2) at attempt 1.
  test('SIGTERM mid-batch: finished jobs stay finished, the rest are given back', async () => {
    const q = queueName('term-batch');
    const w = startWorker(q, 1000, 4);
    try {
      const short = (await c.submitBatch(Array.from({ length: 6 }, () => ({ queue: q, type: 'slow', payload: { seconds: 0.05 } })))).map((j) => j.id);
      const long = (await c.submitBatch(Array.from({ length: 6 }, () => ({ queue: q, type: 'slow', payload: { seconds: 60 }, max_attempts: 1 })))).map((j) => j.id);
      await eventually('the short jobs to finish and 4 long ones to run', async () => {
        const states = await Promise.all(short.map(async (id) => (await c.get(id)).state));
        return states.every((s) => s === 'succeeded') && (await c.queue(q)).active === 4;
      });
      w.proc.kill('SIGTERM');
      const code = await exitWithin(w.exited, 5000, w.output);
      assert.equal(code, 0, w.output());
      assert.equal(w.output().match(/lease given back/g)?.length, 4, w.output());
      const after = await Promise.all(long.map((id) => c.get(id)));
      assert.deepEqual(after.map((j) => [j.state, j.attempt]), long.map(() => ['queued', 0]), w.output());
      const done = await runElsewhere(q, long);
      assert.deepEqual(done.map((j) => [j.state, j.attempt, j.result]), long.map(() => ['succeeded', 1, { elsewhere: true }]), w.output());
      const finished = await Promise.all(short.map((id) => c.get(id)));
      assert.deepEqual(finished.map((j) => [j.state, j.attempt, j.result]), short.map(() => ['succeeded', 1, { slept: 0.05 }]), w.output());
    } finally {
      w.proc.kill('SIGKILL');
    }
  });

  test('kill -9: its jobs come back after one lease', async () => {
    const q = queueName('kill');
    const w = startWorker(q, 10_000, 2);
    try {
      const ids = (await c.submitBatch(Array.from({ length: 2 }, () => ({ queue: q, type: 'slow', payload: { seconds: 60 }, backoff: noBackoff })))).map((j) => j.id);
      await eventually('both jobs to run', async () => (await c.queue(q)).active === 2);
      w.proc.kill('SIGKILL');
      await exitWithin(w.exited, 5000, w.output);
      const killed = performance.now();
      // no heartbeat renews them now: after one lease (1 s) the poller
      // reclaims them, a counted attempt, and they run again
      await eventually('the jobs to come back', async () => (await c.queue(q)).active === 0, 10_000);
      assert.ok(performance.now() - killed < 5000);
      const done = await runElsewhere(q, ids);
      assert.deepEqual(done.map((j) => [j.state, j.attempt, j.result]), ids.map(() => ['succeeded', 2, { elsewhere: true }]));
    } finally {
      w.proc.kill('SIGKILL');
    }
  });
});

// A lease goes back only once the handler signalled at the shutdown
// deadline returned, or after the lease margin (against the API with 5 s
// leases: a 1 s margin).
describe('shutdown: the lease margin', { skip: noLongLeaseApi }, () => {
  const c = client({ url: LONG_LEASE_URL });
  const cleanupMs = 300; // what the handler still does once signalled

  function startWorker(q: string, work: (ctx: JobContext) => Promise<unknown>) {
    const logger = memoryLogger();
    const w = new Worker({ url: LONG_LEASE_URL, apiKey: API_KEY, queues: [q], waitSeconds: 5, shutdownTimeoutMs: 200, handleSignals: false, logger });
    w.handle('unwind', work);
    const done = w.run();
    return { w, done, logger };
  }

  test('the lease goes back once the signalled handler returned', async () => {
    const q = queueName('term-unwind');
    const seen: { marginMs?: number; signalled?: boolean; state?: string } = {};
    let started = false;
    const job = await c.submit({ queue: q, type: 'unwind', max_attempts: 1 });
    const { w, done, logger } = startWorker(q, async (ctx) => {
      seen.marginMs = ctx.leaseTtlMs / 5;
      started = true;
      seen.signalled = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), 30_000);
        ctx.signal.addEventListener('abort', () => {
          clearTimeout(timer);
          resolve(true);
        });
      });
      await sleepMs(cleanupMs); // its cleanup, after the signal
      seen.state = (await c.get(ctx.id)).state; // just before returning
      return 'unwound';
    });
    try {
      await eventually('the job to start', () => started);
      assert.ok(seen.marginMs! > 2 * cleanupMs, "the API's leases are too short for this test");
    } finally {
      w.stop();
      await done;
    }
    const out = logger.lines.join('\n');
    assert.equal(seen.signalled, true, out);
    await eventually('the handler to return', () => seen.state);
    // the lease was still held while the handler unwound...
    assert.equal(seen.state, 'active', out);
    // ...and given back once it returned: queued, the attempt not counted
    const got = await c.get(job.id);
    assert.deepEqual([got.state, got.attempt], ['queued', 0], out);
    assert.equal(got.result, undefined);
    assert.ok(logger.lines.some((l) => l.includes(`job ${job.id}: lease given back`)), out);
    assert.ok(!logger.lines.some((l) => l.includes('still running') && l.includes('margin')), out);
  });

  test('the lease goes back after the margin when the handler goes on', async () => {
    const q = queueName('term-stuck');
    const seen: { marginMs?: number; signalledAt?: number; state?: string } = {};
    let started = false;
    let letGo: () => void = () => {};
    const go = new Promise<void>((resolve) => (letGo = resolve));
    const job = await c.submit({ queue: q, type: 'unwind', max_attempts: 1 });
    const { w, done, logger } = startWorker(q, async (ctx) => {
      seen.marginMs = ctx.leaseTtlMs / 5;
      started = true;
      ctx.signal.addEventListener('abort', () => (seen.signalledAt = performance.now()));
      await go; // ignores the signal until the test lets it go
      seen.state = (await c.get(ctx.id)).state;
      return null;
    });
    let stoppedAt = 0;
    try {
      await eventually('the job to start', () => started);
    } finally {
      w.stop();
      await done;
      stoppedAt = performance.now();
    }
    try {
      const out = logger.lines.join('\n');
      // given back after the margin, with a warning naming the job, while
      // the handler still runs
      assert.ok(seen.signalledAt !== undefined, out);
      assert.ok(stoppedAt - seen.signalledAt! >= seen.marginMs! * 0.9, `${stoppedAt - seen.signalledAt!} ms\n${out}`);
      assert.ok(logger.lines.some((l) => l.startsWith(`warn job ${job.id}: its handler is still running`)), out);
      const got = await c.get(job.id);
      assert.deepEqual([got.state, got.attempt], ['queued', 0], out);
    } finally {
      letGo();
    }
    await eventually('the handler to return', () => seen.state);
    assert.equal(seen.state, 'queued');
  });
});
