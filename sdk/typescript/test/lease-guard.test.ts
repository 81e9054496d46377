// The lease guard: a handler is told to stop on time by the worker's own
// monotonic clock, whatever its heartbeats do (docs/sdk-typescript.md).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { LeaseLostError, Worker, type Handler, type JobContext } from '../src/index.js';
import { API_KEY, client, eventually, memoryLogger, noApi, Proxy, queueName, ScriptedServer, URL_ } from './support.js';

/** Waits for the signal to abort, up to ms; true when it did. */
function aborted(signal: AbortSignal, ms: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

describe('lease guard against the API', { skip: noApi }, () => {
  const c = client();

  // The first heartbeat is answered 503, the second is held open: no
  // renewal is accepted after the claim. The handler must see its signal
  // abort once the claim's lease can no longer be trusted (TTL 1 s less a
  // fifth), while that renewal still hangs, and nothing is reported.
  test('the signal aborts on time while a heartbeat hangs', async () => {
    const q = queueName('guard');
    const beats: number[] = [];
    let release: () => void = () => {};
    const hold = new Promise<void>((r) => {
      release = r;
    });
    let held = true;
    const proxy = await new Proxy(URL_, () => false, false, async (_method, path) => {
      if (!path.endsWith('/heartbeat')) return undefined;
      beats.push(performance.now());
      if (beats.length > 1) await hold; // released when the test ends
      return 503;
    }).start();
    try {
      const seen: { afterMs?: number; beats?: number; held?: boolean; ttlMs?: number } = {};
      const job = await c.submit({ queue: q, type: 'guarded', max_attempts: 1 });
      const w = new Worker({ url: proxy.url, apiKey: API_KEY, queues: [q], waitSeconds: 5, shutdownTimeoutMs: 5000, handleSignals: false, logger: memoryLogger() });
      w.handle('guarded', async (ctx: JobContext) => {
        const started = performance.now();
        if (await aborted(ctx.signal, 10_000)) Object.assign(seen, { afterMs: performance.now() - started, beats: beats.length, held, ttlMs: ctx.leaseTtlMs });
        return 'late';
      });
      const done = w.run();
      try {
        await eventually('the handler to see its signal abort', () => seen.afterMs !== undefined, 15_000);
        await eventually('the attempt to end', () => w.running.length === 0, 5000);
      } finally {
        w.stop();
        held = false;
        release();
        await done;
      }
      assert.equal(seen.beats, 2, 'the second heartbeat was still held open');
      assert.equal(seen.held, true);
      assert.ok(seen.afterMs! <= seen.ttlMs! + 200, `aborted after ${seen.afterMs} ms`);
      assert.equal(proxy.seen.has('complete'), false); // the late result was never sent
      assert.notEqual((await c.get(job.id)).result, 'late');
    } finally {
      held = false;
      release();
      await proxy.close();
    }
  });
});

// No API: a scripted server hands out one job with a 60 s lease and records
// what the worker sends, and performance.now is moved past the lease from
// inside the handler, as a pause of the process (SIGSTOP, SIGCONT) would.
// The guard's timer is most of a minute away, so only the check on asking
// can tell the handler.
describe('lease guard: the check on asking', () => {
  const realNow = performance.now.bind(performance);
  let offset = 0;

  /** A pause of the whole process, as the worker's clock sees it. */
  function pause(ms: number): void {
    offset += ms;
  }

  /** Runs handler on one job claimed from a scripted server, until the
   * attempt ended; returns the paths of what the worker sent. */
  async function runOne(handler: Handler): Promise<string[]> {
    const claimed = {
      job: { id: 'j1', queue: 'q', type: 't', payload: null, attempt: 1, max_attempts: 3 },
      lease: { token: 't1', expires_at: new Date(Date.now() + 60_000).toISOString(), ttl_seconds: 60 },
    };
    const srv = await new ScriptedServer([{ status: 200, body: { jobs: [claimed] } }]).start();
    offset = 0;
    performance.now = () => realNow() + offset;
    let ran = false;
    try {
      const w = new Worker({ url: srv.url, queues: ['q'], waitSeconds: 1, shutdownTimeoutMs: 1000, handleSignals: false, logger: memoryLogger(), maxRetries: 0 });
      w.handle('t', async (ctx) => {
        try {
          return await handler(ctx);
        } finally {
          ran = true;
        }
      });
      const done = w.run();
      try {
        await eventually('the attempt to end', () => ran && w.running.length === 0, 10_000);
      } finally {
        w.stop();
        await done;
      }
      return srv.requests.map((r) => r.path).filter((p) => p !== '/v1/claim');
    } finally {
      Reflect.deleteProperty(performance, 'now');
      await srv.close();
    }
  }

  test('a handler resumed past its lease sees its signal aborted at once', async () => {
    const seen: Record<string, unknown> = {};
    const sent = await runOne(async (ctx) => {
      const signal = ctx.signal;
      let events = 0;
      signal.addEventListener('abort', () => events++);
      seen.before = signal.aborted;
      pause(ctx.leaseTtlMs * 2);
      seen.after = signal.aborted;
      seen.events = events;
      seen.reason = (signal.reason as Error).message;
      assert.throws(() => ctx.check(), LeaseLostError);
      assert.throws(() => signal.throwIfAborted(), LeaseLostError);
      await assert.rejects(ctx.progress(50, 'half'), LeaseLostError);
      return 'acted';
    });
    assert.deepEqual(seen, { before: false, after: true, events: 1, reason: 'the lease could not be renewed in time' });
    assert.deepEqual(sent, []); // no heartbeat, no outcome
  });

  test('check() alone tells a resumed handler', async () => {
    let threw: unknown;
    const sent = await runOne((ctx) => {
      pause(ctx.leaseTtlMs * 2);
      try {
        ctx.check();
      } catch (err) {
        threw = err;
      }
      return 'acted';
    });
    assert.ok(threw instanceof LeaseLostError);
    assert.deepEqual(sent, []);
  });

  test('no outcome is sent for a handler that returns past its lease without asking', async () => {
    const sent = await runOne((ctx) => {
      pause(ctx.leaseTtlMs * 2);
      return 'acted';
    });
    assert.deepEqual(sent, []);
  });
});
