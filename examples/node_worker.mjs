// A Sundial worker in Node.js (18+), using only fetch (docs/workers.md).
//
// It claims jobs over HTTP with a long poll, renews each lease while the job
// runs, and reports the outcome; it runs the built-in test types
// sundial.echo, sundial.sleep (with progress) and sundial.fail.
// Configuration: SUNDIAL_URL, SUNDIAL_API_KEY (a key with the work scope),
// SUNDIAL_QUEUES, SUNDIAL_WORKER_ID.
// It shows the protocol; for real workers use the SDK in sdk/typescript
// (docs/sdks.md): concurrency, SIGTERM, complete retried after a network error.
import { hostname } from 'node:os';

const URL = (process.env.SUNDIAL_URL || 'http://127.0.0.1:8080').replace(/\/$/, '');
const KEY = process.env.SUNDIAL_API_KEY || '';
const QUEUES = (process.env.SUNDIAL_QUEUES || 'default').split(',');
const WORKER = process.env.SUNDIAL_WORKER_ID || `node-${hostname()}-${process.pid}`;

class LeaseLost extends Error {}

async function call(path, body) {
  const headers = { 'Content-Type': 'application/json' };
  if (KEY) headers.Authorization = `Bearer ${KEY}`;
  const res = await fetch(URL + path, { method: 'POST', headers, body: JSON.stringify(body) });
  const data = await res.json();
  if (res.status === 409) throw new LeaseLost(data.error.message);
  if (!res.ok) throw new Error(`${path}: ${res.status} ${data.error?.message}`);
  return data;
}

const sleepMs = (ms) => new Promise((r) => setTimeout(r, ms));

const handlers = {
  'sundial.echo': async (job) => job.payload ?? null,
  'sundial.sleep': async (job, progress) => {
    const ms = job.payload?.ms ?? 250;
    for (let step = 1; step <= 4; step++) {
      await sleepMs(ms / 4);
      await progress(25 * step, `slept ${(ms * step) / 4} of ${ms} ms`);
    }
    return { slept_ms: ms };
  },
  'sundial.fail': async (job) => {
    const p = { times: 1, message: 'sundial.fail: planned failure', ...job.payload };
    if (job.attempt <= p.times) throw new Error(p.message);
    return { failed_attempts: p.times };
  },
};

async function run(job, lease) {
  const path = `/v1/jobs/${job.id}`;
  const token = lease.token;
  let lost = false;
  const renew = setInterval(() => {
    call(`${path}/heartbeat`, { token, worker_id: WORKER }).catch((e) => {
      if (e instanceof LeaseLost) lost = true; // else: retried at the next beat
    });
  }, (lease.ttl_seconds * 1000) / 3);
  const progress = async (percent, message) => {
    if (lost) throw new LeaseLost('lease lost');
    await call(`${path}/heartbeat`, { token, progress: percent, message });
  };
  try {
    const result = await handlers[job.type](job, progress);
    await call(`${path}/complete`, { token, result, worker_id: WORKER });
  } catch (e) {
    if (e instanceof LeaseLost) console.log(`${job.id}: ${e.message}`);
    else await call(`${path}/fail`, { token, error: String(e.message || e), worker_id: WORKER }).catch(() => {});
  } finally {
    clearInterval(renew);
  }
}

console.log(`worker ${WORKER} serving ${QUEUES} at ${URL}`);
for (;;) {
  try {
    const { jobs } = await call('/v1/claim', {
      worker_id: WORKER, queues: QUEUES, types: Object.keys(handlers), wait_seconds: 20,
    });
    for (const c of jobs) await run(c.job, c.lease);
  } catch (e) {
    console.log(`claim failed (${e.message}); retrying in 1 s`);
    await sleepMs(1000);
  }
}
