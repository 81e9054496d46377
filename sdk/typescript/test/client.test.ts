// The client against a real API (SUNDIAL_URL) and against scripted local
// servers (retries).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  ApiError,
  Client,
  ConflictError,
  InvalidArgumentError,
  NotFoundError,
  RateLimitedError,
  TransportError,
  UnauthenticatedError,
  UnavailableError,
  WaitTimeoutError,
  Worker,
  type Job,
} from '../src/index.js';
import { API_KEY, client, eventually, memoryLogger, noApi, queueName, running, ScriptedServer, URL_ } from './support.js';

describe('client against the API', { skip: noApi }, () => {
  const c = client();

  test('submit, get, wait', async () => {
    const q = queueName('wait');
    const job = await c.submit({ queue: q, type: 'greet', payload: { name: 'Ada' }, max_attempts: 2 });
    assert.equal(job.state, 'queued');
    assert.equal(job.queue, q);
    assert.equal(job.max_attempts, 2);
    assert.deepEqual((await c.get(job.id)).payload, { name: 'Ada' });

    const w = new Worker({ url: URL_, apiKey: API_KEY, queues: [q], waitSeconds: 5, handleSignals: false, logger: memoryLogger() });
    w.handle<{ name: string }>('greet', (ctx) => `hello ${ctx.payload.name}`);
    const done = await running(w, () => c.wait(job.id, { timeoutMs: 20_000 }));
    assert.equal(done.state, 'succeeded');
    assert.equal(done.result, 'hello Ada');
    assert.equal(done.attempt, 1);
  });

  test('wait times out', async () => {
    const job = await c.submit({ queue: queueName('timeout'), type: 'nobody.runs.this' });
    const err = await c.wait(job.id, { timeoutMs: 300 }).then(
      () => assert.fail('no timeout'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof WaitTimeoutError);
    assert.equal((err.job as Job).state, 'queued');
  });

  test('batch', async () => {
    const q = queueName('batch');
    const jobs = await c.submitBatch([
      { queue: q, type: 'step', payload: { n: 0 } },
      { queue: q, type: 'step', payload: { n: 1 }, depends_on: ['#0'] },
      { queue: q, type: 'step', payload: { n: 2 }, depends_on: ['#1'] },
    ]);
    assert.deepEqual(jobs.map((j) => j.state), ['queued', 'waiting', 'waiting']);
    assert.deepEqual(jobs[1]!.depends_on, [jobs[0]!.id]);
    await assert.rejects(
      c.submitBatch([{ queue: q, type: 'ok' }, { queue: q, type: 'ok', priority: 'urgent' as 'high' }]),
      (e: unknown) => e instanceof InvalidArgumentError && e.field === 'jobs[1].priority',
    );
    assert.equal((await c.queue(q)).submitted_total, 3);
  });

  test('workflow', async () => {
    const q1 = queueName('wf1');
    const q2 = queueName('wf2');
    const doc = {
      id: `${q1}-run`,
      steps: [
        { name: 'report', job: { queue: q2, type: 'step' }, after: ['extract'] },
        { name: 'extract', job: { queue: q1, type: 'step' } },
      ],
    };
    const wf = await c.submitWorkflow(doc);
    assert.equal(wf.id, doc.id);
    assert.equal(wf.steps.extract!.state, 'queued');
    assert.equal(wf.steps.report!.state, 'waiting');
    assert.deepEqual(wf.steps.report!.depends_on, [wf.steps.extract!.id]);
    assert.equal((await c.submitWorkflow(doc)).steps.report!.id, wf.steps.report!.id);
    await assert.rejects(
      c.submitWorkflow({ steps: [{ name: 'a', job: { queue: q1, type: 'step' }, after: ['b'] }] }),
      (e: unknown) => e instanceof InvalidArgumentError && e.field === 'steps[0].after[0]',
    );
    assert.equal((await c.queue(q1)).submitted_total, 1);
  });

  test('batch', async () => {
    const q1 = queueName('b1');
    const q2 = queueName('b2');
    const qc = queueName('bcb');
    const out = await c.createBatch({
      jobs: [{ queue: q1, type: 'row' }, { queue: q2, type: 'row' }],
      on_complete: { queue: qc, type: 'report', payload: { to: 'ops' } },
    });
    const id = out.batch.id;
    assert.equal(out.batch.total, 2);
    assert.equal(out.batch.sealed, true);
    assert.deepEqual((await c.batchJobs(id)).jobs.map((j) => j.id), out.job_ids);
    assert.equal(await c.cancelBatch(id), 2);
    const states: string[] = [];
    for await (const r of c.batchResults(id)) states.push(r.state);
    assert.deepEqual(states, ['cancelled', 'cancelled']);
    const cbID = await eventually('on_complete fired', async () => (await c.getBatch(id)).on_complete?.job_id);
    const cb = await c.get(cbID);
    assert.equal(cb.batch, id);
    assert.deepEqual(cb.payload, { batch: id, to: 'ops' });
    assert.equal(await c.retryBatch(id), 2);
    await assert.rejects(
      c.createBatch({ jobs: [{ type: 'row', idempotency_key: 'k' }] }),
      (e: unknown) => e instanceof InvalidArgumentError && e.field === 'jobs[0].idempotency_key',
    );
    await assert.rejects(c.getBatch('no-such-batch'), (e: unknown) => e instanceof NotFoundError);
  });

  test('idempotency key repeat', async () => {
    const q = queueName('idem');
    const first = await c.submit({ queue: q, type: 'charge', payload: { order: 7 }, idempotency_key: 'order-7' });
    const again = await c.submit({ queue: q, type: 'charge', payload: { order: 7 }, idempotency_key: 'order-7' });
    assert.equal(again.id, first.id);
    assert.equal(again.idempotency_key, 'order-7');
    assert.equal((await c.queue(q)).submitted_total, 1);
  });

  test('typed errors', async () => {
    const q = queueName('errors');
    const bad = await c.submit({ queue: q, type: 'x', priority: 'urgent' as 'high' }).catch((e: unknown) => e);
    assert.ok(bad instanceof InvalidArgumentError && bad instanceof ApiError);
    assert.equal(bad.status, 400);
    assert.equal(bad.code, 'invalid_argument');
    assert.equal(bad.field, 'priority');
    assert.match(bad.requestId ?? '', /^sdk-ts-/);

    const missing = await c.get('01JUNKJUNKJUNKJUNKJUNKJUNK').catch((e: unknown) => e);
    assert.ok(missing instanceof NotFoundError);
    assert.equal(missing.status, 404);
    assert.equal(missing.code, 'not_found');
    assert.ok(missing.requestId);

    const job = await c.submit({ queue: q, type: 'x', delay_seconds: 3600 });
    assert.equal((await c.cancel(job.id)).state, 'cancelled');
    const conflict = await c.cancel(job.id).catch((e: unknown) => e);
    assert.ok(conflict instanceof ConflictError);
    assert.equal(conflict.status, 409);
    assert.match(conflict.message, /cancelled/);

    if (API_KEY) {
      await assert.rejects(new Client({ url: URL_, apiKey: 'wrong-key' }).queues(), (e: unknown) => e instanceof UnauthenticatedError && e.status === 401);
    }
    // no history store in the test stack: the search is unavailable
    await assert.rejects(client({ maxRetries: 0 }).search({ queue: q }), (e: unknown) => e instanceof UnavailableError && e.code === 'unavailable');
    await assert.rejects(client({ maxRetries: 0 }).events(job.id), UnavailableError);
  });

  test('cancel and retry', async () => {
    const job = await c.submit({ queue: queueName('cancel'), type: 'later', delay_seconds: 3600 });
    assert.equal(job.state, 'scheduled');
    assert.equal((await c.cancel(job.id)).state, 'cancelled');
    const again = await c.retry(job.id);
    assert.equal(again.state, 'queued');
    assert.equal(again.attempt, 0);
  });

  test('queues', async () => {
    const q = queueName('queues');
    const paused = await c.pause(q);
    assert.equal(paused.name, q);
    assert.equal(paused.paused, true);
    assert.ok((await c.queues()).some((x) => x.name === q));
    assert.equal((await c.resume(q)).paused, false);
    assert.equal((await c.queue(q)).paused, false);
    await assert.rejects(c.resume(queueName('unknown')), NotFoundError);
    assert.deepEqual((await c.dead(q)).jobs, []);
    assert.equal(await c.retryDead(q), 0);
    assert.equal(await c.purgeDead(q), 0);
  });

  test('live jobs and bulk actions', async () => {
    const c = client();
    const q = queueName('bulk');
    for (const type of ['a', 'b', 'b']) await c.submit({ queue: q, type });
    const page = await c.queueJobs(q, { limit: 2 });
    assert.equal(page.jobs.length, 2);
    assert.ok(page.next_cursor);
    assert.equal((await c.queueJobs(q, { limit: 2, cursor: page.next_cursor })).jobs.length, 1);
    assert.deepEqual((await c.queueJobs(q, { type: 'b' })).jobs.map((j) => j.type), ['b', 'b']);
    assert.deepEqual((await c.queueJobs(q, { state: 'dead' })).jobs, []);
    const res = await c.bulk(q, { action: 'cancel', filter: { state: 'queued', type: 'b' } });
    assert.equal(res.matched, 2);
    assert.equal(res.count, 2);
    assert.equal(res.done, true);
    await assert.rejects(c.bulk(q, { action: 'retry' } as never), (e: unknown) => e instanceof InvalidArgumentError && e.field === 'ids');
  });

  test('schedules', async () => {
    const q = queueName('sched');
    const id = `ts-${q}`;
    const made = await c.putSchedule(id, { cron: '0 3 * * *', timezone: 'Europe/Berlin', job: { queue: q, type: 'report', payload: { full: true } } });
    assert.equal(made.id, id);
    assert.equal(made.enabled, true);
    assert.equal(made.upcoming?.length, 5);
    assert.equal((await c.getSchedule(id)).timezone, 'Europe/Berlin');
    assert.ok((await c.schedules({ queue: q })).some((s) => s.id === id));
    const patched = await c.patchSchedule(id, { enabled: false });
    assert.equal(patched.enabled, false);
    assert.equal(patched.next_run_at, null);
    const fired = await c.triggerSchedule(id);
    assert.deepEqual([fired.queue, fired.type, fired.payload], [q, 'report', { full: true }]);
    assert.equal((await c.previewSchedule({ every_seconds: 60 })).length, 5);
    await c.deleteSchedule(id);
    await assert.rejects(c.getSchedule(id), NotFoundError);
    await assert.rejects(c.putSchedule(id, { cron: '61 * * * *', job: { queue: q, type: 'report' } }), (e: unknown) => e instanceof InvalidArgumentError && e.field === 'cron');
  });

  test('limits', async () => {
    const q = queueName('limits');
    const lim = await c.setLimit(q, 'smtp', { types: ['email.send'], concurrency: 5, rate: { limit: 100, period_seconds: 60 } });
    assert.deepEqual([lim.name, lim.concurrency, lim.active], ['smtp', 5, 0]);
    assert.deepEqual((await c.getLimit(q, 'smtp')).rate, { limit: 100, period_seconds: 60 });
    assert.deepEqual((await c.limits(q)).map((l) => l.name), ['smtp']);
    await c.deleteLimit(q, 'smtp');
    assert.deepEqual(await c.limits(q), []);
    await assert.rejects(c.getLimit(q, 'smtp'), NotFoundError);
    await assert.rejects(c.setLimit(q, 'none', { types: ['x'] }), InvalidArgumentError);
  });

  test('workers lists HTTP workers', async () => {
    const q = queueName('registry');
    const w = new Worker({ url: URL_, apiKey: API_KEY, queues: [q], workerId: `ts-registry-${q.slice(-8)}`, waitSeconds: 1, handleSignals: false, logger: memoryLogger() });
    w.handle('noop', () => null);
    await running(w, () => eventually('the worker in GET /v1/workers', async () => (await c.workers()).some((x) => x.id === w.workerId)));
  });
});

describe('retries against a scripted server', () => {
  const job = { id: '01JOB', queue: 'default', type: 'x', state: 'queued' };

  test('503 then 200 honours Retry-After', async () => {
    const srv = await new ScriptedServer([
      { status: 503, headers: { 'Retry-After': '1' }, body: { error: { code: 'unavailable', message: 'redis' } } },
      { status: 200, body: job },
    ]).start();
    try {
      const got = await new Client({ url: srv.url, backoffMs: 10 }).get('01JOB');
      assert.equal(got.id, '01JOB');
      assert.equal(srv.requests.length, 2);
      const gap = srv.requests[1]!.at - srv.requests[0]!.at;
      assert.ok(gap >= 950, `the retry came ${gap} ms after the 503, before Retry-After`);
    } finally {
      await srv.close();
    }
  });

  test('429 retried, then thrown with its fields', async () => {
    const limited = { status: 429, headers: { 'Retry-After': '0', 'X-Request-Id': 'rid-1' }, body: { error: { code: 'rate_limited', message: 'slow down' } } };
    const srv = await new ScriptedServer([limited, limited, limited]).start();
    try {
      const err = await new Client({ url: srv.url, maxRetries: 2, backoffMs: 10 }).submit({ type: 'x' }).catch((e: unknown) => e);
      assert.ok(err instanceof RateLimitedError);
      assert.deepEqual([err.status, err.requestId, err.retryAfterMs], [429, 'rid-1', 0]);
      assert.equal(srv.requests.length, 3); // a POST too: a 429 changed nothing
    } finally {
      await srv.close();
    }
  });

  test('a broken connection is retried only when that is safe', async () => {
    const srv = await new ScriptedServer([{ status: 0 }, { status: 200, body: job }]).start();
    const srv2 = await new ScriptedServer([{ status: 0 }, { status: 201, body: job }]).start();
    const srv3 = await new ScriptedServer([{ status: 0 }, { status: 201, body: job }]).start();
    try {
      assert.equal((await new Client({ url: srv.url, backoffMs: 10 }).get('01JOB')).id, '01JOB');
      assert.equal(srv.requests.length, 2);
      // a submit without an idempotency key may have been written: not repeated
      await assert.rejects(new Client({ url: srv2.url, backoffMs: 10 }).submit({ type: 'x' }), TransportError);
      assert.equal(srv2.requests.length, 1);
      // with one it is safe to repeat
      assert.equal((await new Client({ url: srv3.url, backoffMs: 10 }).submit({ type: 'x', idempotency_key: 'k' })).id, '01JOB');
      assert.equal(srv3.requests.length, 2);
    } finally {
      await Promise.all([srv.close(), srv2.close(), srv3.close()]);
    }
  });

  test('the Bearer key and a request id are sent', async () => {
    const srv = await new ScriptedServer([{ status: 200, body: { queues: [] } }]).start();
    try {
      assert.deepEqual(await new Client({ url: srv.url, apiKey: 'k-123' }).queues(), []);
      assert.equal(srv.requests[0]!.headers.authorization, 'Bearer k-123');
      assert.match(String(srv.requests[0]!.headers['x-request-id']), /^sdk-ts-/);
    } finally {
      await srv.close();
    }
  });
});
