// The BullMQ side of tools/peercost: BullMQ driven as its README shows it
// (Queue.add, Queue.addBulk, a Worker; connections as {host, port}), on the
// word of the Go tool. Usage: node bullmq.js HOST:PORT QUEUE. One JSON
// command a line on stdin, one JSON answer a line on stdout:
//   {"op":"ready"}                          connects the Queue
//   {"op":"fill","state":S,"n":N}           S = queued | scheduled | finished | dead;
//                                           answers {"count"} of jobs in S
//   {"op":"submit","n":N}                   N single Queue.add calls, one after another;
//                                           answers {"seconds"}
//   {"op":"version"} {"op":"close"}
'use strict';

const readline = require('node:readline');
const { Queue, Worker } = require('bullmq');

const [addr, queueName] = process.argv.slice(2);
const [host, port] = addr.split(':');
if (host !== '127.0.0.1' && host !== 'localhost') {
  console.error('bullmq.js: loopback only');
  process.exit(2);
}
const connection = { host, port: parseInt(port, 10) };
const queue = new Queue(queueName, { connection });

// The payload of every system: submit and due times, µs since the epoch.
const payload = (now, due) => ({ t: now * 1000, due: due * 1000 });
const HOUR = 3600 * 1000;
const BULK = 1000;

// BullMQ's own names for the tool's states.
const stateName = { queued: 'wait', scheduled: 'delayed', finished: 'completed', dead: 'failed' };

async function count(state) {
  const s = stateName[state];
  const c = await queue.getJobCounts(s, 'active');
  return state === 'queued' ? c.wait + c.active : c[s];
}

async function fill(state, n) {
  for (let done = 0; done < n; done += BULK) {
    const k = Math.min(BULK, n - done);
    const now = Date.now();
    const jobs = [];
    for (let i = 0; i < k; i++) {
      if (state === 'scheduled') {
        jobs.push({ name: 'noop', data: payload(now, now + HOUR), opts: { timestamp: now, delay: HOUR } });
      } else {
        // Defaults: attempts 1, removeOnComplete and removeOnFail off (every job is kept).
        jobs.push({ name: 'noop', data: payload(now, now) });
      }
    }
    await queue.addBulk(jobs);
  }
  if (state === 'finished' || state === 'dead') {
    const target = (await count(state)) + (await count('queued'));
    const w = new Worker(queueName, async () => {
      if (state === 'dead') throw new Error('peercost: fails on purpose');
    }, { connection, concurrency: 50 });
    w.on('error', (e) => console.error('bullmq.js worker error:', e.message));
    await w.waitUntilReady();
    const deadline = Date.now() + 10 * 60 * 1000;
    while ((await count(state)) < target) {
      if (Date.now() > deadline) throw new Error(`timed out: ${await count(state)} of ${target} ${state}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    await w.close();
  }
  return count(state);
}

async function submit(n) {
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    const now = Date.now();
    await queue.add('noop', payload(now, now));
  }
  return Number(process.hrtime.bigint() - start) / 1e9;
}

const rl = readline.createInterface({ input: process.stdin });
const reply = (o) => process.stdout.write(JSON.stringify(o) + '\n');
(async () => {
  for await (const line of rl) {
    const c = JSON.parse(line);
    try {
      switch (c.op) {
        case 'ready': await queue.waitUntilReady(); reply({ ok: true }); break;
        case 'fill': reply({ ok: true, count: await fill(c.state, c.n) }); break;
        case 'submit': reply({ ok: true, seconds: await submit(c.n) }); break;
        case 'version': reply({ ok: true, version: require('bullmq/package.json').version }); break;
        case 'close': await queue.close(); reply({ ok: true }); rl.close(); return;
        default: reply({ ok: false, error: `unknown op ${c.op}` });
      }
    } catch (e) {
      reply({ ok: false, error: String(e && e.stack || e) });
    }
  }
})();
