// A Sundial worker on the TypeScript SDK (sdk/typescript, docs/sdk-typescript.md):
// runs the built-in test types sundial.echo, sundial.sleep (with progress) and
// sundial.fail. Env: SUNDIAL_URL, SUNDIAL_API_KEY (work scope), SUNDIAL_QUEUES,
// SUNDIAL_WORKER_ID. Uses the installed package (npm install ./sdk/typescript),
// else the repository's build (cd sdk/typescript && npm ci && npm run build;
// make deps does it).
const { Worker } = await import('@sundialhq/sundial').catch(async () => {
  try {
    return await import('../sdk/typescript/dist/index.js');
  } catch {
    console.error('the TypeScript SDK is not built: cd sdk/typescript && npm ci && npm run build');
    process.exit(2);
  }
});

const worker = new Worker({ concurrency: 4 });

worker.handle('sundial.echo', (ctx) => ctx.payload ?? null);

worker.handle('sundial.sleep', async (ctx) => {
  const ms = ctx.payload?.ms ?? 250;
  for (let step = 1; step <= 4; step++) {
    await new Promise((r) => setTimeout(r, ms / 4));
    ctx.check(); // throws when the lease is gone or the worker is shutting down
    await ctx.progress(25 * step, `slept ${(ms * step) / 4} of ${ms} ms`);
  }
  return { slept_ms: ms };
});

worker.handle('sundial.fail', (ctx) => {
  const p = { times: 1, message: 'sundial.fail: planned failure', ...ctx.payload };
  if (ctx.attempt <= p.times) throw new Error(p.message);
  return { failed_attempts: p.times };
});

await worker.run(); // until SIGTERM or SIGINT: running jobs finish, the rest are given back
