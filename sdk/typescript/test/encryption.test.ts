// Client-side encryption (Keyring): the envelope alone, then the client and
// the worker against a real API (SUNDIAL_URL).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { describe, test } from 'node:test';
import { ENC_FIELD, EncryptionError, isEncrypted, keyIdOf, Keyring, MissingKeyError, NoRetry, Worker, type Encrypted, type WorkerOptions } from '../src/index.js';
import { API_KEY, client, memoryLogger, noApi, queueName, running, URL_ } from './support.js';

const newKey = (): string => randomBytes(32).toString('base64');
const marker = (): string => `MARKER-${randomBytes(6).toString('hex')}`;

describe('envelope', () => {
  test('round trip hides the plaintext; a payload does not open as a result', () => {
    const m = marker();
    const kr = Keyring.parse(`k1:${newKey()}`);
    const v = kr.seal('payload', { ssn: m });
    const text = JSON.stringify(v);
    assert.ok(isEncrypted(v));
    assert.deepEqual(Object.keys(v[ENC_FIELD]).sort(), ['ct', 'dek', 'iv', 'kid', 'v']);
    assert.equal(keyIdOf(v), 'k1');
    assert.ok(!text.includes(m) && !text.includes('ssn'));
    assert.deepEqual(kr.open('payload', v), { ssn: m });
    assert.notDeepEqual(kr.seal('payload', { ssn: m }), v);
    assert.throws(() => kr.open('result', v), EncryptionError);
  });

  test('text keeps the words before it', () => {
    const m = marker();
    const kr = Keyring.parse(`k1:${newKey()}`);
    const s = kr.sealText('error', `card ${m}`);
    assert.ok(s.startsWith('$sundial_enc:') && !s.includes(m));
    assert.equal(kr.openText('error', `timeout after 3s: ${s}`), `timeout after 3s: card ${m}`);
    assert.equal(kr.openText('error', 'plain'), 'plain');
  });

  test('rotation, a missing key, another key under the same id', () => {
    const [k1, k2] = [newKey(), newKey()];
    const old = Keyring.parse(`k1:${k1}`);
    const rotated = Keyring.parse(`k1:${k1},k2:${k2}`);
    assert.equal(rotated.primary, 'k2');
    assert.deepEqual(rotated.open('payload', old.seal('payload', [1, 2])), [1, 2]);
    const nv = rotated.seal('payload', 3);
    assert.equal(keyIdOf(nv), 'k2');
    assert.throws(() => old.open('payload', nv), (err: unknown) =>
      err instanceof MissingKeyError && err.keyId === 'k2' && err.message === 'payload encrypted with key "k2", which this keyring lacks');
    assert.equal(Keyring.parse(`k1:${k1}\nk2:${k2}\n`, 'k1').primary, 'k1');
    assert.throws(() => Keyring.parse(`k1:${newKey()}`).open('payload', old.seal('payload', 1)),
      (err: unknown) => err instanceof EncryptionError && !(err instanceof MissingKeyError) && err.keyId === 'k1');
  });

  test('tampering is refused', () => {
    const kr = Keyring.parse(`k1:${newKey()},k2:${newKey()}`, 'k1');
    const v = kr.seal('payload', { a: marker() });
    const changed = (f: string, value: unknown): unknown => ({ [ENC_FIELD]: { ...v[ENC_FIELD], [f]: value } });
    const flipped = (f: 'ct' | 'iv' | 'dek'): unknown => {
      const b = Buffer.from(v[ENC_FIELD][f], 'base64');
      b[b.length - 1] = b[b.length - 1]! ^ 1;
      return changed(f, b.toString('base64'));
    };
    const cases: Record<string, unknown> = {
      ct: flipped('ct'), iv: flipped('iv'), dek: flipped('dek'), 'kid relabelled': changed('kid', 'k2'),
      version: changed('v', 2), 'extra field': changed('x', 1), 'not base64': changed('ct', '!!'),
    };
    for (const [name, bad] of Object.entries(cases)) {
      assert.throws(() => kr.open('payload', bad), EncryptionError, name);
    }
  });

  test('parse and the environment; printing shows no key', () => {
    const k = newKey();
    for (const [text, primary, err] of [['', undefined, 'no key'], ['k1', undefined, 'entry 1'], [`k 1:${k}`, undefined, 'entry 1'],
      ['k1:short', undefined, '32 bytes'], [`k1:${k},k1:${k}`, undefined, 'twice'], [`k1:${k}`, 'k9', 'primary']] as const) {
      assert.throws(() => Keyring.parse(text, primary), (e: Error) => e.message.includes(err) && !e.message.includes(k));
    }
    const kr = Keyring.parse(`k1:${k}`);
    for (const s of [String(kr), JSON.stringify(kr), inspect(kr)]) assert.ok(!s.includes(k) && s.includes('k1'), s);
    assert.equal(Keyring.fromEnv({}), undefined);
    const file = join(mkdtempSync(join(tmpdir(), 'kr-')), 'keys');
    writeFileSync(file, `# keys\nk1:${k}\nk2:${newKey()}\n`);
    const fromFile = Keyring.fromEnv({ SUNDIAL_KEYRING_FILE: file, SUNDIAL_KEYRING_PRIMARY: 'k1' })!;
    assert.deepEqual([fromFile.ids, fromFile.primary], [['k1', 'k2'], 'k1']);
    assert.throws(() => Keyring.fromEnv({ SUNDIAL_KEYRING_FILE: file, SUNDIAL_KEYRING: `k1:${k}` }));
    assert.throws(() => Keyring.fromEnv({ SUNDIAL_KEYRING_PRIMARY: 'k1' }));
  });
});

describe('encrypted jobs against the API', { skip: noApi }, () => {
  const [k1, k2] = [newKey(), newKey()];
  const old = Keyring.parse(`k1:${k1}`);
  const ring = Keyring.parse(`k1:${k1},k2:${k2}`);
  const plain = client();
  const c = client({ keyring: ring });
  const worker = (q: string, opts: WorkerOptions = {}): Worker =>
    new Worker({ url: URL_, apiKey: API_KEY, queues: [q], waitSeconds: 5, shutdownTimeoutMs: 5000, handleSignals: false, logger: memoryLogger(), ...opts });

  test('round trip across a rotation; result and error text encrypted', async () => {
    const [q, m] = [queueName('enc'), marker()];
    const seen: unknown[] = [];
    const ok = await client({ keyring: old }).submit({ queue: q, type: 'check', payload: { ssn: m } });
    const bad = await c.submit({ queue: q, type: 'check', payload: { ssn: m, fail: true }, max_attempts: 3 });
    assert.equal(keyIdOf(ok.payload), 'k1');
    assert.equal(keyIdOf(bad.payload), 'k2');
    const w = worker(q, { keyring: ring });
    w.handle<{ ssn: string; fail?: boolean }>('check', async (ctx) => {
      seen.push([ctx.payload, ctx.job.payload]);
      if (ctx.payload.fail) throw new NoRetry(`rejected ${ctx.payload.ssn}`);
      return { echo: ctx.payload.ssn };
    });
    const [done, dead] = await running(w, () => Promise.all([plain.wait(ok.id, { timeoutMs: 30_000 }), plain.wait(bad.id, { timeoutMs: 30_000 })]));
    assert.deepEqual(seen[0], [{ ssn: m }, { ssn: m }]);
    assert.deepEqual([done.state, keyIdOf(done.result)], ['succeeded', 'k2']);
    assert.deepEqual([dead.state, dead.attempt], ['dead', 1]);
    for (const j of [done, dead]) assert.ok(!JSON.stringify(j).includes(m));
    assert.deepEqual(c.decrypt(done).result, { echo: m });
    assert.deepEqual(c.decrypt(done).payload, { ssn: m });
    assert.equal(c.decrypt(dead).last_error, `rejected ${m}`);
    assert.throws(() => client({ keyring: old }).decrypt(done), MissingKeyError);
  });

  test('a worker lacking the key fails the job for good', async () => {
    const q = queueName('enc-nokey');
    const k3 = client({ keyring: Keyring.parse(`k3:${newKey()}`) });
    let calls = 0;
    const j1 = await k3.submit({ queue: q, type: 'check', payload: { ssn: marker() }, max_attempts: 5 });
    const w = worker(q, { keyring: ring });
    w.handle('check', async () => void calls++);
    const d1 = await running(w, () => plain.wait(j1.id, { timeoutMs: 30_000 }));
    assert.deepEqual([d1.state, d1.attempt, calls], ['dead', 1, 0]);
    assert.equal(d1.last_error, 'payload encrypted with key "k3", which this worker\'s keyring lacks');
    const q2 = queueName('enc-none');
    const j2 = await c.submit({ queue: q2, type: 'check', payload: { ssn: marker() }, max_attempts: 5 });
    const w2 = worker(q2);
    w2.handle('check', async () => void calls++);
    const d2 = await running(w2, () => plain.wait(j2.id, { timeoutMs: 30_000 }));
    assert.deepEqual([d2.state, d2.attempt, calls], ['dead', 1, 0]);
    assert.equal(d2.last_error, 'payload encrypted with key "k2", which this worker\'s keyring lacks');
  });

  test('a long error text is cut to fit once sealed', async () => {
    const [q, m] = [queueName('enc-long'), marker()];
    const j = await c.submit({ queue: q, type: 'check', payload: { ssn: m }, max_attempts: 1 });
    const w = worker(q, { keyring: ring });
    w.handle('check', async () => {
      throw new NoRetry(m + 'x'.repeat(60_000));
    });
    const d = await running(w, () => plain.wait(j.id, { timeoutMs: 30_000 }));
    assert.equal(d.state, 'dead');
    assert.ok((d.last_error ?? '').length <= 64 << 10);
    const text = c.decrypt(d).last_error ?? '';
    assert.ok(text.startsWith(`${m}xxx`) && text.endsWith('...'), text.slice(0, 40));
  });

  test('a tampered payload fails for good', async () => {
    const q = queueName('enc-tamper');
    const v: Encrypted = ring.seal('payload', { ssn: marker() });
    const ct = Buffer.from(v[ENC_FIELD].ct, 'base64');
    ct[0] = ct[0]! ^ 0x80;
    v[ENC_FIELD].ct = ct.toString('base64');
    const j = await plain.submit({ queue: q, type: 'check', payload: v as unknown as Record<string, unknown>, max_attempts: 5 });
    const w = worker(q, { keyring: ring });
    w.handle('check', async () => null);
    const d = await running(w, () => plain.wait(j.id, { timeoutMs: 30_000 }));
    assert.deepEqual([d.state, d.attempt], ['dead', 1]);
    assert.ok(d.last_error?.includes('payload encrypted with key "k2" does not decrypt'), d.last_error);
  });

  test('batches of jobs, workflows and batches encrypt', async () => {
    const [q, m] = [queueName('enc-many'), marker()];
    const many = await c.submitBatch([{ queue: q, type: 't', payload: { m } }]);
    const wf = await c.submitWorkflow({ steps: [{ name: 'a', job: { queue: q, type: 't', payload: { m } } }] });
    const b = await c.createBatch({ jobs: [{ queue: q, type: 't', payload: { m } }] });
    const jobs = [many[0]!, wf.steps['a']!, await plain.get(b.job_ids[0]!)];
    for (const j of jobs) {
      assert.equal(keyIdOf(j.payload), 'k2');
      assert.ok(!JSON.stringify(j).includes(m));
      assert.deepEqual(c.decrypt(j).payload, { m });
    }
  });
});
