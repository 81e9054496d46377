// The job options of issue 50 against a real API (SUNDIAL_URL): expiry,
// deadlines, debounce, sequences and tags.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Client, InvalidArgumentError, Worker, type Job, type WorkerOptions } from '../src/index.js';
import { API_KEY, client, eventually, memoryLogger, noApi, queueName, running, ScriptedServer, URL_ } from './support.js';

function worker(q: string, opts: WorkerOptions = {}): Worker {
  return new Worker({ url: URL_, apiKey: API_KEY, queues: [q], waitSeconds: 5, shutdownTimeoutMs: 5000, handleSignals: false, logger: memoryLogger(), ...opts });
}

const sleepMs = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('job options against the API', { skip: noApi }, () => {
  const c = client();

  test('the submit options are on the job', async () => {
    const q = queueName('opts');
    const startBy = new Date(Math.floor(Date.now() / 1000) * 1000 + 3_600_000);
    const deadline = new Date(startBy.getTime() + 3_600_000);
    const job = await c.submit({
      queue: q,
      type: 'noop',
      start_by: startBy.toISOString(),
      deadline: deadline.toISOString(),
      sequence: { key: 'order-7', on_failure: 'cancel' },
      tags: ['tenant:acme', 'vip'],
    });
    const got = await c.get(job.id);
    assert.equal(Date.parse(got.start_by ?? ''), startBy.getTime());
    assert.equal(Date.parse(got.deadline ?? ''), deadline.getTime());
    assert.deepEqual(got.sequence, { key: 'order-7', on_failure: 'cancel' });
    assert.deepEqual(got.tags, ['tenant:acme', 'vip']);
    assert.equal(job.debounced, undefined);
    const rel = await c.submit({ queue: q, type: 'noop', expires_in_seconds: 60, deadline_in_seconds: 120 });
    assert.ok(Math.abs(Date.parse(rel.start_by ?? '') - (Date.now() + 60_000)) < 10_000, rel.start_by);
    assert.ok(Math.abs(Date.parse(rel.deadline ?? '') - (Date.now() + 120_000)) < 10_000, rel.deadline);
    await assert.rejects(c.submit({ queue: q, type: 'noop', start_by: startBy.toISOString(), expires_in_seconds: 5 }), InvalidArgumentError);
    await assert.rejects(c.submit({ queue: q, type: 'noop', tags: ['no spaces'] }), (err: unknown) => err instanceof InvalidArgumentError && (err.field ?? '').startsWith('tags'));
  });

  test('an expired job ends dead and never runs', async () => {
    const q = queueName('expiry');
    await c.pause(q);
    const job = await c.submit({ queue: q, type: 'late', expires_in_seconds: 0.5 });
    const dead = await eventually('the job to expire', async () => {
      const j = await c.get(job.id);
      return j.state === 'dead' ? j : undefined;
    }, 30_000);
    assert.match(dead.last_error ?? '', /^expired:/);
    await c.resume(q);
    const later = await c.submit({ queue: q, type: 'late' });
    const ran: string[] = [];
    const w = worker(q);
    w.handle('late', (ctx) => void ran.push(ctx.id));
    await running(w, () => c.wait(later.id, { timeoutMs: 30_000 }));
    assert.deepEqual(ran, [later.id]);
    assert.equal((await c.get(job.id)).state, 'dead');
  });

  test('a deadline stops the retries', async () => {
    const q = queueName('deadline');
    const job = await c.submit({ queue: q, type: 'fails', deadline_in_seconds: 1, max_attempts: 100, backoff: { base_seconds: 0.3, max_seconds: 0.3 } });
    const w = worker(q);
    w.handle('fails', () => {
      throw new Error('try again');
    });
    const done = await running(w, () => c.wait(job.id, { timeoutMs: 30_000 }));
    assert.equal(done.state, 'dead');
    assert.match(done.last_error ?? '', /deadline passed/);
    assert.ok(done.attempt < 100);
  });

  test('debounce (replace) keeps one job with the last payload', async () => {
    const q = queueName('debounce');
    const debounce = { key: 'user-1', window_seconds: 1 };
    const first = await c.submit({ queue: q, type: 'index', payload: { n: 1 }, debounce });
    const second = await c.submit({ queue: q, type: 'index', payload: { n: 2 }, debounce });
    const third = await c.submit({ queue: q, type: 'index', payload: { n: 3 }, debounce });
    assert.notEqual(first.debounced, true);
    assert.deepEqual([second.id, second.debounced], [first.id, true]);
    assert.deepEqual([third.id, third.debounced], [first.id, true]);
    assert.equal((await c.get(first.id)).debounce_key, 'user-1');
    const seen: unknown[] = [];
    const w = worker(q);
    w.handle('index', (ctx) => {
      seen.push(ctx.payload);
      return 'ok';
    });
    const done = await running(w, () => c.wait(first.id, { timeoutMs: 30_000 }));
    assert.equal(done.state, 'succeeded');
    assert.deepEqual(seen, [{ n: 3 }]);
    await assert.rejects(c.submit({ queue: q, type: 'index', debounce, delay_seconds: 5 }), InvalidArgumentError);
  });

  test('a sequence runs its jobs in submit order, one at a time', async () => {
    const q = queueName('seq');
    const jobs: Job[] = [];
    for (let i = 0; i < 4; i++) jobs.push(await c.submit({ queue: q, type: 'step', payload: { i }, sequence: { key: 'acct-1' } }));
    const other = await c.submit({ queue: q, type: 'step', payload: { i: 100 }, sequence: { key: 'acct-2' } });
    const waiting = await c.get(jobs[1]!.id);
    assert.equal(waiting.state, 'waiting');
    assert.equal(waiting.held_back?.reason, 'dependencies');
    assert.ok(waiting.held_back?.message.includes(jobs[0]!.id), waiting.held_back?.message);
    const order: number[] = [];
    let now = 0;
    let most = 0;
    const w = worker(q, { concurrency: 4 });
    w.handle<{ i: number }>('step', async (ctx) => {
      const mine = ctx.payload.i < 100;
      if (mine) {
        most = Math.max(most, ++now);
        order.push(ctx.payload.i);
      }
      await sleepMs(50);
      if (mine) now--;
    });
    const done = await running(w, () => Promise.all([...jobs, other].map((j) => c.wait(j.id, { timeoutMs: 30_000 }))));
    assert.deepEqual(done.map((j) => j.state), Array(5).fill('succeeded'));
    assert.deepEqual(order, [0, 1, 2, 3]);
    assert.equal(most, 1);
  });

  test('tags filter the live list, bulk actions and the dead letters', async () => {
    const q = queueName('tags');
    await c.pause(q);
    const red: Job[] = [];
    for (let i = 0; i < 3; i++) red.push(await c.submit({ queue: q, type: 't', tags: ['red'] }));
    await c.submit({ queue: q, type: 't', tags: ['blue'] });
    await c.submit({ queue: q, type: 't' });
    const page = await c.queueJobs(q, { state: 'queued', tag: 'red', limit: 100 });
    assert.deepEqual(page.jobs.map((j) => j.id).sort(), red.map((j) => j.id).sort());
    const res = await c.bulk(q, { action: 'cancel', filter: { state: 'queued', tag: 'red' } });
    assert.equal(res.count, 3);
    assert.deepEqual(new Set(await Promise.all(red.map(async (j) => (await c.get(j.id)).state))), new Set(['cancelled']));
    assert.equal((await c.queueJobs(q, { state: 'queued', limit: 100 })).jobs.length, 2);
    const bad = await c.submit({ queue: q, type: 'boom', max_attempts: 1, tags: ['bad'] });
    await c.submit({ queue: q, type: 'boom', max_attempts: 1 });
    await c.resume(q);
    const w = worker(q);
    w.handle('boom', () => {
      throw new Error('boom');
    });
    w.handle('t', () => null);
    await running(w, () => eventually('two dead jobs', async () => (await c.dead(q)).jobs.length === 2, 30_000));
    assert.deepEqual((await c.dead(q, { tag: 'bad' })).jobs.map((j) => j.id), [bad.id]);
  });
});

// The test stack has no history store: the search's parameters are checked
// against a scripted server.
describe('the history search by tag and payload field', () => {
  test('sends tag and payload.<field> (a value that is not a string as its JSON text)', async () => {
    const srv = await new ScriptedServer([{ status: 200, body: { jobs: [], next_cursor: '' } }]).start();
    try {
      const c = new Client({ url: srv.url, maxRetries: 0 });
      await c.search({ queue: 'mail', tag: 'tenant:acme', payload: { order: 42, region: 'eu west', vip: true } });
      const u = new URL(srv.requests[0]!.path, 'http://x');
      assert.equal(u.pathname, '/v1/jobs');
      assert.deepEqual(Object.fromEntries(u.searchParams), { queue: 'mail', tag: 'tenant:acme', 'payload.order': '42', 'payload.region': 'eu west', 'payload.vip': 'true' });
    } finally {
      await srv.close();
    }
  });
});
