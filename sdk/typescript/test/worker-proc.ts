// A worker process for the shutdown test: runs "slow" jobs that sleep
// payload.seconds (stopping early when signalled) until SIGTERM.
// Env: SUNDIAL_URL, SUNDIAL_API_KEY, SUNDIAL_QUEUES, SHUTDOWN_TIMEOUT_MS,
// CONCURRENCY (default 2).
import { Worker, type JobContext } from '../src/index.js';

async function slow(ctx: JobContext<{ seconds: number }>): Promise<{ slept: number }> {
  console.log(`started ${ctx.id}`);
  const stopped = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), ctx.payload.seconds * 1000);
    ctx.signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
  console.log(`${stopped ? 'cancelled' : 'finished'} ${ctx.id}`);
  return { slept: ctx.payload.seconds };
}

const worker = new Worker({ concurrency: Number(process.env.CONCURRENCY || 2), waitSeconds: 5, shutdownTimeoutMs: Number(process.env.SHUTDOWN_TIMEOUT_MS) });
worker.handle('slow', slow);
console.log('ready');
await worker.run();
console.log('exited');
