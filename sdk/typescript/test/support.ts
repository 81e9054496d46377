// What the SDK's tests share: the API under test (SUNDIAL_URL,
// SUNDIAL_API_KEY), unique queue names, waiting on conditions with
// deadlines, a worker running for a block, a scripted HTTP server and a
// forwarding proxy that can drop connections.
import { randomBytes } from 'node:crypto';
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, Worker, type ClientOptions, type Logger } from '../src/index.js';

export const URL_ = process.env.SUNDIAL_URL ?? '';
export const API_KEY = process.env.SUNDIAL_API_KEY || undefined;
/** Set when no API is configured: node:test's skip option takes it. */
export const noApi = URL_ ? false : 'SUNDIAL_URL is not set: these tests need a running API (make test-sdk starts one)';
/** A second API over the same Redis whose leases last 5 s, not 1 s: a lease
 * margin (a fifth) long enough for a handler's cleanup. */
export const LONG_LEASE_URL = process.env.SUNDIAL_LONG_LEASE_URL ?? '';
/** Set when no such API is configured: node:test's skip option takes it. */
export const noLongLeaseApi = LONG_LEASE_URL ? false : 'SUNDIAL_LONG_LEASE_URL is not set: this test needs an API with 5 s leases (make test-sdk starts one)';

export function client(opts: ClientOptions = {}): Client {
  return new Client({ url: URL_, ...(API_KEY ? { apiKey: API_KEY } : {}), ...opts });
}

export function queueName(prefix: string): string {
  return `ts-${prefix}-${randomBytes(4).toString('hex')}`;
}

/** Calls cond until it returns something truthy, and resolves with it;
 * rejects naming what after timeoutMs. */
export async function eventually<T>(what: string, cond: () => T | Promise<T>, timeoutMs = 20_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = await cond();
    if (got) return got as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A logger that keeps the lines, for assertions and failure reports. */
export function memoryLogger(): Logger & { lines: string[] } {
  const lines: string[] = [];
  const keep = (level: string) => (m: string) => {
    lines.push(`${level} ${m}`);
  };
  return { lines, debug: keep('debug'), info: keep('info'), warn: keep('warn'), error: keep('error') };
}

/** Runs the worker for the block, then stops it and waits for run(). */
export async function running<T>(worker: Worker, block: () => Promise<T>): Promise<T> {
  const done = worker.run();
  try {
    return await block();
  } finally {
    worker.stop();
    await done;
  }
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** One scripted answer: status 0 breaks the connection without one. */
export interface Scripted {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
}

/** A local HTTP server that answers each request with the next scripted
 * answer and records the requests. */
export class ScriptedServer {
  readonly requests: Array<{ method: string; path: string; at: number; headers: IncomingMessage['headers'] }> = [];
  url = '';
  private readonly server: Server;

  constructor(private readonly answers: Scripted[]) {
    this.server = createServer((req, res) => void this.answer(req, res));
  }

  async start(): Promise<this> {
    this.url = await listen(this.server);
    return this;
  }

  private async answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    await readBody(req);
    this.requests.push({ method: req.method ?? '', path: req.url ?? '', at: performance.now(), headers: req.headers });
    const a = this.answers.shift() ?? { status: 500 };
    if (a.status === 0) {
      req.socket.destroy();
      return;
    }
    const data = a.body === undefined ? '' : JSON.stringify(a.body);
    res.writeHead(a.status, { 'Content-Type': 'application/json', ...a.headers });
    res.end(data);
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** Forwards requests to the API; drop(method, path) returning true breaks
 * that request's connection without forwarding it (with afterForwarding:
 * after forwarding it, before the answer). answer(method, path), when given,
 * runs first: a status it resolves with is the answer, the request not
 * forwarded (it may take its time, holding the request open); undefined
 * forwards it. seen counts requests by the last segment of their path
 * (claim, heartbeat, complete, fail…). */
export class Proxy {
  readonly seen = new Map<string, number>();
  readonly dropped: string[] = [];
  url = '';
  private readonly server: Server;

  constructor(
    private readonly target: string,
    private readonly drop: (method: string, path: string) => boolean,
    private readonly afterForwarding = false,
    private readonly answer?: (method: string, path: string) => Promise<number | undefined>,
  ) {
    this.server = createServer((req, res) => void this.forward(req, res));
  }

  async start(): Promise<this> {
    this.url = await listen(this.server);
    return this;
  }

  private async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req);
    const path = req.url ?? '/';
    const kind = path.split('?')[0]!.replace(/\/$/, '').split('/').pop() ?? '';
    this.seen.set(kind, (this.seen.get(kind) ?? 0) + 1);
    const dropping = this.drop(req.method ?? '', path);
    if (dropping) this.dropped.push(path);
    if (dropping && !this.afterForwarding) {
      req.socket.destroy();
      return;
    }
    const status = this.answer ? await this.answer(req.method ?? '', path) : undefined;
    if (status !== undefined) {
      if (!res.destroyed) res.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify({ error: { code: 'unavailable', message: 'proxy' } }));
      return;
    }
    const headers = { ...req.headers };
    delete headers.host;
    delete headers.connection;
    const up = httpRequest(this.target + path, { method: req.method, headers }, (answer) => {
      if (dropping) {
        answer.resume();
        answer.on('end', () => req.socket.destroy());
        return;
      }
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    up.on('error', () => req.socket.destroy());
    up.end(body);
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
