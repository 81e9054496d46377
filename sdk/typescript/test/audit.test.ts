// The session and audit log routes against a real API (SUNDIAL_URL), which
// the SDK test stack runs with an admin key and without a history store.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, test } from 'node:test';
import { UnavailableError } from '../src/index.js';
import { API_KEY, client, noApi } from './support.js';

describe('session and audit log against the API', { skip: noApi }, () => {
  const c = client();

  test('session names the key by its id, never the key', async () => {
    const s = await c.session();
    assert.equal(s.actor.kind, 'key');
    assert.equal(s.actor.id, 'key:' + createHash('sha256').update(API_KEY ?? '').digest('hex').slice(0, 12));
    assert.ok(s.scopes.includes('admin'));
    assert.equal(s.queues, '*');
    assert.ok(!JSON.stringify(s).includes(API_KEY ?? ''));
  });

  test('the audit log without a history store is unavailable, saying where the records go', async () => {
    await assert.rejects(c.audit({ action: 'queue.pause' }), (e: unknown) => e instanceof UnavailableError && /log/.test(e.message));
  });
});
