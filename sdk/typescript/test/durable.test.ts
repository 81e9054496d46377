// Durable jobs against a real API (SUNDIAL_URL): steps recorded once per
// job, sleeps and waits for signals that park the job, signals sent by the
// client (docs/durable.md).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConflictError, NoRetry, NotFoundError, Parked, SignalTimeoutError, StepError, Worker, type Job, type WorkerOptions } from '../src/index.js';
import { API_KEY, client, eventually, memoryLogger, noApi, queueName, running, URL_ } from './support.js';

const noBackoff = { base_seconds: 0, max_seconds: 0 };

function worker(q: string, opts: WorkerOptions = {}): Worker {
  return new Worker({ url: URL_, apiKey: API_KEY, queues: [q], concurrency: 4, waitSeconds: 5, shutdownTimeoutMs: 5000, handleSignals: false, logger: memoryLogger(), ...opts });
}

function steps(job: Job): Array<[number, string, string]> {
  return (job.durable?.steps ?? []).map((s) => [s.seq, s.name, s.status]);
}

describe('durable jobs against the API', { skip: noApi }, () => {
  const c = client();

  /** Waits until the job is parked waiting for the signal; resolves with it. */
  const awaiting = (id: string, signal: string): Promise<Job> =>
    eventually(`job ${id} to wait for ${signal}`, async () => {
      const j = await c.get(id);
      return j.state === 'scheduled' && j.durable?.awaiting?.signal === signal ? j : undefined;
    });

  test('order → charge step → wait for "shipped" → sleep 1 s → email step, across a crash', async () => {
    // The example. The first attempt fails after the charge step (a
    // crash); the retry gets the charge back without running it, waits for
    // "shipped" (parked: no slot, no lease), sleeps 1 s (parked again), then
    // sends the email.
    const q = queueName('order');
    const ran = { charge: 0, email: 0 };
    let woke = 0;
    const job = await c.submit({ queue: q, type: 'order', payload: { amount: 42 }, backoff: noBackoff });
    const w = worker(q);
    w.handle<{ amount: number }>('order', async (ctx) => {
      const charge = await ctx.step('charge', () => ({ id: `ch_${++ran.charge}`, amount: ctx.payload.amount }));
      if (ctx.attempt === 1) throw new Error('crash after the charge');
      const shipped = await ctx.waitSignal<{ carrier: string }>('shipped', { timeoutMs: 60_000 });
      await ctx.sleep(1000);
      woke ||= Date.now();
      const emails = await ctx.step('email', async () => ++ran.email);
      return { charge, carrier: shipped.carrier, emails };
    });
    let sent = 0;
    const done = await running(w, async () => {
      const parked = await awaiting(job.id, 'shipped');
      assert.deepEqual(steps(parked).slice(0, 1), [[1, 'charge', 'ok']]);
      // Parked: no slot holds it (the worker frees it once the park's answer
      // reached it, which may come after the API's answer to our read).
      await eventually('the parked job to leave the worker', () => w.running.length === 0, 5000);
      assert.deepEqual(w.running, []);
      sent = Date.now();
      assert.deepEqual(await c.signal(job.id, 'shipped', { carrier: 'ups' }, 'ship-1'), { status: 'delivered', job_id: job.id });
      return c.wait(job.id, { timeoutMs: 30_000 });
    });
    assert.deepEqual([done.state, done.result], ['succeeded', { charge: { id: 'ch_1', amount: 42 }, carrier: 'ups', emails: 1 }]);
    assert.deepEqual(ran, { charge: 1, email: 1 });
    assert.deepEqual(steps(done), [
      [1, 'charge', 'ok'],
      [2, 'signal:shipped', 'ok'],
      [3, 'sleep', 'ok'],
      [4, 'email', 'ok'],
    ]);
    assert.ok(woke - sent >= 1000, `woke ${woke - sent} ms after the signal`);
    assert.deepEqual(done.durable?.steps?.[1]?.result, { carrier: 'ups' });
    assert.deepEqual(done.durable?.signals?.map((s) => [s.name, s.value]), [['shipped', { carrier: 'ups' }]]);
    // Each park gave its attempt back (max_attempts grew by one): two
    // attempts counted, the crash and the last.
    assert.equal(done.attempt - (done.max_attempts - job.max_attempts), 2);
  });

  test('a signal sent before the wait is kept: to the job, and to a key no job chose yet', async () => {
    const q = queueName('early');
    const byId = await c.submit({ queue: q, type: 'approve' });
    assert.equal((await c.signal(byId.id, 'approved', 'yes')).status, 'delivered');
    assert.deepEqual(await c.signalKey(q, 'order-7', 'approved', { by: 'key' }), { status: 'pending' });
    const byKey = await c.submit({ queue: q, type: 'approve', payload: { key: 'order-7' } });
    const w = worker(q);
    w.handle<{ key?: string } | null>('approve', async (ctx) => {
      await ctx.step('prepare', () => true);
      const key = ctx.payload?.key;
      return ctx.waitSignal('approved', key ? { key } : {});
    });
    const [a, b] = await running(w, () => Promise.all([c.wait(byId.id, { timeoutMs: 30_000 }), c.wait(byKey.id, { timeoutMs: 30_000 })]));
    assert.deepEqual([a.state, a.result, a.attempt], ['succeeded', 'yes', 1]);
    assert.deepEqual([b.state, b.result, b.attempt], ['succeeded', { by: 'key' }, 1]);
    assert.equal(b.durable?.signal_key, 'order-7');
    // Now the key names the job, which ended: it takes no more signals.
    await assert.rejects(c.signalKey(q, 'order-7', 'other'), ConflictError);
  });

  test('a signal sent twice with one idempotency key is delivered once', async () => {
    const q = queueName('dup');
    let attempts = 0;
    const job = await c.submit({ queue: q, type: 'approve' });
    const w = worker(q);
    w.handle('approve', (ctx) => {
      attempts++;
      return ctx.waitSignal('approved');
    });
    const [first, again, done] = await running(w, async () => {
      await awaiting(job.id, 'approved');
      const first = await c.signal(job.id, 'approved', { by: 'ada' }, 'approval-1');
      const again = await c.signal(job.id, 'approved', { by: 'ada' }, 'approval-1');
      await assert.rejects(c.signal(job.id, 'approved', { by: 'bob' }), ConflictError);
      return [first, again, await c.wait(job.id, { timeoutMs: 30_000 })] as const;
    });
    assert.deepEqual([first.status, again.status], ['delivered', 'duplicate']);
    assert.deepEqual([done.state, done.result], ['succeeded', { by: 'ada' }]);
    assert.equal(done.durable?.signals?.length, 1);
    assert.equal(attempts, 2); // the wait, and the one after the signal
    await assert.rejects(c.signal(job.id, 'late'), ConflictError); // an ended job takes no more signals
    await assert.rejects(c.signal('no-such-job', 'approved'), NotFoundError);
  });

  test('a wait times out with SignalTimeoutError, recorded', async () => {
    const q = queueName('timeout');
    const job = await c.submit({ queue: q, type: 'approve' });
    const w = worker(q);
    w.handle('approve', async (ctx) => {
      try {
        await ctx.waitSignal('approved', { timeoutMs: 300 });
        return 'approved';
      } catch (err) {
        if (err instanceof SignalTimeoutError) return 'timed out';
        throw err;
      }
    });
    const done = await running(w, () => c.wait(job.id, { timeoutMs: 30_000 }));
    assert.deepEqual([done.state, done.result], ['succeeded', 'timed out']);
    assert.deepEqual(steps(done), [[1, 'signal:approved', 'timeout']]);
  });

  test('steps that changed under a running job fail naming the step', async () => {
    const q = queueName('nondet');
    const job = await c.submit({ queue: q, type: 'v', max_attempts: 2, backoff: noBackoff });
    const w = worker(q);
    w.handle('v', async (ctx) => {
      await ctx.step(ctx.attempt === 1 ? 'charge' : 'refund', () => 1); // the code changed under the job
      if (ctx.attempt === 1) throw new Error('crash');
    });
    const dead = await running(w, () => c.wait(job.id, { timeoutMs: 30_000 }));
    assert.equal(dead.state, 'dead');
    assert.match(dead.last_error ?? '', /step 1 is "refund" in the handler but the job recorded "charge" there/);
  });

  test("a step's own retries, and its recorded error thrown again without running it", async () => {
    const q = queueName('steperr');
    const ran = { flaky: 0, broken: 0 };
    const job = await c.submit({ queue: q, type: 'pay', backoff: noBackoff });
    const w = worker(q);
    w.handle('pay', async (ctx) => {
      const got = await ctx.step(
        'flaky',
        () => {
          if (++ran.flaky < 3) throw new Error('try again');
          return 'ok';
        },
        { retries: 2, backoffMs: 10 },
      );
      try {
        await ctx.step(
          'charge',
          () => {
            ran.broken++;
            throw new NoRetry('card declined');
          },
          { retries: 5 },
        );
        return 'charged';
      } catch (err) {
        if (!(err instanceof StepError)) throw err;
        if (ctx.attempt === 1) throw new Error('crash', { cause: err });
        return `${got}: ${err.stepMessage}`;
      }
    });
    const done = await running(w, () => c.wait(job.id, { timeoutMs: 30_000 }));
    assert.deepEqual([done.state, done.result, done.attempt], ['succeeded', 'ok: card declined', 2]);
    assert.deepEqual(ran, { flaky: 3, broken: 1 });
    assert.deepEqual(steps(done), [
      [1, 'flaky', 'ok'],
      [2, 'charge', 'err'],
    ]);
  });

  test('a handler that swallows Parked is parked all the same', async () => {
    const q = queueName('swallow');
    let swallowed = 0;
    const log = memoryLogger();
    const job = await c.submit({ queue: q, type: 'careless' });
    const w = worker(q, { logger: log });
    w.handle('careless', async (ctx) => {
      try {
        await ctx.sleep(300);
      } catch (err) {
        assert.ok(err instanceof Parked);
        swallowed++;
        return 'too early'; // the pitfall under test: rethrow Parked instead
      }
      return 'slept';
    });
    const done = await running(w, () => c.wait(job.id, { timeoutMs: 30_000 }));
    assert.deepEqual([done.state, done.result, swallowed], ['succeeded', 'slept', 1]);
    assert.ok(
      log.lines.some((l) => l.startsWith('warn') && l.includes('caught Parked')),
      log.lines.join('\n'),
    );
  });
});
