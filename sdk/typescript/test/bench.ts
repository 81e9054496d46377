// Throughput of the worker over HTTP: submits N no-op jobs to a fresh queue,
// then runs a Worker at each concurrency until all have succeeded, and prints
// jobs/s. Not part of the suite (npm test runs *.test.js only).
//
//   npm run pretest && SUNDIAL_URL=http://127.0.0.1:8080 SUNDIAL_API_KEY=... \
//     node build/test/bench.js [jobs] [concurrency ...]
//
// internal/sdktest's TestSDKThroughput (SUNDIAL_SDK_BENCH=1) runs it against
// a real API, poller and redis-server on loopback.
import { Client, Worker } from '../src/index.js';

async function bench(c: Client, n: number, concurrency: number): Promise<number> {
  const q = `ts-bench-${concurrency}-${process.pid}-${Date.now()}`;
  for (let start = 0; start < n; start += 1000) {
    await c.submitBatch(Array.from({ length: Math.min(1000, n - start) }, () => ({ queue: q, type: 'noop' })));
  }
  const w = new Worker({ queues: [q], concurrency, waitSeconds: 1, shutdownTimeoutMs: 5000, handleSignals: false, logger: { debug() {}, info() {}, warn() {}, error() {} } });
  w.handle('noop', () => null);
  const began = performance.now();
  const done = w.run();
  while ((await c.queue(q)).succeeded_total < n) await new Promise((r) => setTimeout(r, 20));
  const took = (performance.now() - began) / 1000;
  w.stop();
  await done;
  return n / took;
}

const n = Number(process.argv[2] ?? 4000);
const levels = process.argv.slice(3).map(Number);
const c = new Client();
for (const conc of levels.length ? levels : [8, 64]) {
  console.log(`typescript worker: ${n} no-op jobs at concurrency ${conc}: ${Math.round(await bench(c, n, conc))} jobs/s`);
}
