// A real Sundial stack on free loopback ports for the end-to-end run:
// redis-server, the MongoDB stand-in (scripts/mongo-standin.sh), and the
// api, poller and two worker binaries built from this repository. Every
// process is started here and stopped here, by its pid.

import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, mkdirSync, openSync, rmSync, chmodSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

export async function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** waitFor polls check (async, returns truthy when done) until it is or the deadline passes. */
export async function waitFor(what, check, { timeoutMs = 30_000, everyMs = 100 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${last.message}` : ""}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

function tcpOpen(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

function redisPing(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    let buf = "";
    s.once("connect", () => s.write("PING\r\n"));
    s.on("data", (d) => {
      buf += d;
      if (buf.includes("\r\n")) {
        s.destroy();
        resolve(buf.startsWith("+PONG"));
      }
    });
    s.once("error", () => resolve(false));
    setTimeout(() => {
      s.destroy();
      resolve(false);
    }, 1000);
  });
}

export class Stack {
  constructor({ workers = 2, concurrency = 20, history = true } = {}) {
    this.opts = { workers, concurrency, history };
    this.procs = new Map(); // name → ChildProcess
  }

  async start() {
    // Under /tmp so that the postgres user can reach PostgreSQL's data dir when we run as root.
    this.dir = mkdtempSync("/tmp/sundial-e2e-");
    chmodSync(this.dir, 0o755);
    this.logs = path.join(this.dir, "logs");
    mkdirSync(this.logs);
    // E2E_BIN_DIR: binaries built elsewhere (api, poller, worker); otherwise built here.
    let bin = process.env.E2E_BIN_DIR;
    if (!bin) {
      bin = path.join(this.dir, "bin");
      mkdirSync(bin);
      execFileSync("go", ["build", "-o", bin + "/", "./services/api", "./services/poller", "./services/worker"], { cwd: repo, stdio: "inherit" });
    }
    this.bin = bin;

    this.redisPort = await freePort();
    this.redisDir = path.join(this.dir, "redis");
    mkdirSync(this.redisDir);
    this.startRedis();
    await waitFor("redis", () => redisPing(this.redisPort), { timeoutMs: 15_000 });

    const env = {
      ...process.env,
      SUNDIAL_REDIS_URL: `redis://127.0.0.1:${this.redisPort}/0`,
      SUNDIAL_LOG_LEVEL: "warn",
      SUNDIAL_METRICS_ADDR: "127.0.0.1:0",
      SUNDIAL_RATE_LIMIT: "0",
      SUNDIAL_HEARTBEAT_INTERVAL: "1s",
      SUNDIAL_QUEUES: "default,e2e,load",
      SUNDIAL_CONCURRENCY: String(this.opts.concurrency),
      SUNDIAL_SHUTDOWN_TIMEOUT: "2s",
    };
    if (this.opts.history) {
      this.mongoPort = await freePort();
      const pgPort = await freePort();
      this.spawn("mongo", "bash", [path.join(repo, "scripts/mongo-standin.sh"), "run", "--port", String(this.mongoPort), "--pg-port", String(pgPort),
        "--data-dir", path.join(this.dir, "pg"), "--log-dir", this.logs], { env: process.env });
      await waitFor("the MongoDB stand-in", () => tcpOpen(this.mongoPort), { timeoutMs: 120_000, everyMs: 200 });
      env.SUNDIAL_MONGO_URI = `mongodb://127.0.0.1:${this.mongoPort}`;
      env.SUNDIAL_HISTORY = "on";
      // The stand-in's PostgreSQL also holds a transactional outbox, which the poller relays.
      this.pgURL = `postgres://postgres@127.0.0.1:${pgPort}/postgres`;
      env.SUNDIAL_OUTBOX_POSTGRES_URL = this.pgURL;
    } else {
      env.SUNDIAL_HISTORY = "off";
    }
    this.apiPort = await freePort();
    env.SUNDIAL_HTTP_ADDR = `127.0.0.1:${this.apiPort}`;
    this.env = env;
    this.base = `http://127.0.0.1:${this.apiPort}`;
    this.spawn("api", path.join(bin, "api"), [], { env });
    this.spawn("poller", path.join(bin, "poller"), [], { env });
    for (let i = 1; i <= this.opts.workers; i++) {
      this.spawn(`worker-${i}`, path.join(bin, "worker"), [], { env: { ...env, SUNDIAL_WORKER_ID: `e2e-worker-${i}` } });
    }
    await waitFor("the API to be ready", async () => (await fetch(this.base + "/readyz")).ok, { timeoutMs: 60_000 });
    await waitFor("the workers", async () => {
      const r = await fetch(this.base + "/v1/workers");
      return r.ok && (await r.json()).workers.length === this.opts.workers;
    }, { timeoutMs: 30_000 });
    return this;
  }

  startRedis() {
    this.spawn("redis", "redis-server", ["--port", String(this.redisPort), "--bind", "127.0.0.1", "--dir", this.redisDir,
      "--appendonly", "yes", "--appendfsync", "everysec", "--save", ""], {});
  }

  /** stopRedis ends redis-server (SIGTERM: it writes its AOF) and waits for it to exit. */
  async stopRedis() {
    await this.stop("redis");
  }

  async restartRedis() {
    this.startRedis();
    await waitFor("redis", () => redisPing(this.redisPort), { timeoutMs: 15_000 });
  }

  spawn(name, cmd, args, { env }) {
    const out = openSync(path.join(this.logs, `${name}.log`), "a");
    const p = spawn(cmd, args, { env: env ?? process.env, stdio: ["ignore", out, out] });
    p.exited = new Promise((r) => p.once("exit", r));
    this.procs.set(name, p);
    return p;
  }

  async stop(name, timeoutMs = 10_000) {
    const p = this.procs.get(name);
    if (!p) return;
    this.procs.delete(name);
    if (p.exitCode !== null || p.signalCode !== null) return;
    p.kill("SIGTERM");
    const done = await Promise.race([p.exited.then(() => true), new Promise((r) => setTimeout(() => r(false), timeoutMs))]);
    if (!done) {
      p.kill("SIGKILL");
      await p.exited;
    }
  }

  async stopAll({ keep = false } = {}) {
    // Workers and API first, then the poller, the history store, Redis last.
    const order = [...this.procs.keys()].filter((n) => n.startsWith("worker")).concat(["api", "poller", "mongo", "redis"]);
    for (const n of order) await this.stop(n, n === "mongo" ? 20_000 : 10_000);
    if (!keep && this.dir) rmSync(this.dir, { recursive: true, force: true });
  }

  async api(method, p, body) {
    const res = await fetch(this.base + p, {
      method,
      headers: body === undefined ? {} : { "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    const data = text ? JSON.parse(text) : undefined;
    if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${text}`);
    return data;
  }
}
