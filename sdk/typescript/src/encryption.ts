/** Client-side envelope encryption of payloads, results and error text
 * (docs/payloads.md, "Encryption"), interoperable with the Go library and
 * the Python SDK. An encrypted value is {"$sundial_enc": {v: 1, kid, dek,
 * iv, ct}}: AES-256-GCM (node:crypto) under a fresh 32-byte data key, which
 * the keyring's primary key seals. An encrypted error text is
 * "$sundial_enc:" + base64(JSON of that object). */

import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';

import { SundialError } from './errors.js';

/** The one key of an encrypted value. */
export const ENC_FIELD = '$sundial_enc';
/** The start of an encrypted text. */
export const ENC_TEXT_PREFIX = '$sundial_enc:';
/** The envelope format written and read. */
export const ENC_VERSION = 1;

/** What a value is: bound into its ciphertext. */
export type Sealable = 'payload' | 'result' | 'error';

/** An encrypted value. */
export interface Encrypted {
  [ENC_FIELD]: { v: number; kid: string; dek: string; iv: string; ct: string };
}

const NONCE = 12;
const KEY = 32;
const TAG = 16;
const KEY_ID = /^[A-Za-z0-9_.-]{1,64}$/;
const B64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** A value that does not decrypt: tampered with, malformed, or sealed under
 * another key of the same id (MissingKeyError: a key id the keyring lacks). */
export class EncryptionError extends SundialError {
  constructor(message: string, readonly what: Sealable, readonly keyId: string | undefined) {
    super(message);
    this.name = 'EncryptionError';
  }
}

/** A value sealed under a key id the keyring lacks. */
export class MissingKeyError extends EncryptionError {
  constructor(what: Sealable, keyId: string) {
    super(`${what} encrypted with key "${keyId}", which this keyring lacks`, what, keyId);
    this.name = 'MissingKeyError';
  }
}

/** Whether id is a valid key id: 1 to 64 of [A-Za-z0-9_.-]. */
export function validKeyId(id: string): boolean {
  return KEY_ID.test(id);
}

/** Whether a decoded JSON value is an encrypted value. */
export function isEncrypted(value: unknown): value is Encrypted {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length === 1 && ENC_FIELD in value;
}

/** The key id an encrypted value names, or undefined. */
export function keyIdOf(value: unknown): string | undefined {
  if (!isEncrypted(value)) return undefined;
  const kid = (value[ENC_FIELD] as { kid?: unknown }).kid;
  return typeof kid === 'string' ? kid : undefined;
}

function unb64(s: unknown): Buffer {
  if (typeof s !== 'string' || s.length % 4 !== 0 || !B64.test(s)) throw new TypeError('not base64');
  return Buffer.from(s, 'base64');
}

function gcmSeal(key: Buffer, plaintext: Buffer, aad: string): Buffer {
  const nonce = randomBytes(NONCE);
  const c = createCipheriv('aes-256-gcm', key, nonce);
  c.setAAD(Buffer.from(aad, 'utf8'));
  return Buffer.concat([nonce, c.update(plaintext), c.final(), c.getAuthTag()]);
}

function gcmOpen(key: Buffer, nonce: Buffer, sealed: Buffer, aad: string): Buffer {
  if (sealed.length < TAG) throw new Error('short');
  const d = createDecipheriv('aes-256-gcm', key, nonce);
  d.setAAD(Buffer.from(aad, 'utf8'));
  d.setAuthTag(sealed.subarray(sealed.length - TAG));
  return Buffer.concat([d.update(sealed.subarray(0, sealed.length - TAG)), d.final()]);
}

/** Named 32-byte keys: the primary one encrypts, each one decrypts what was
 * sealed under its id. Rotate by adding a key, making it primary and keeping
 * the old ones. Printing it shows the key ids, never the keys. */
export class Keyring {
  readonly primary: string;
  readonly #keys: Map<string, Buffer>;

  constructor(keys: ReadonlyMap<string, Uint8Array> | Record<string, Uint8Array>, primary?: string) {
    const entries = keys instanceof Map ? [...keys.entries()] : Object.entries(keys);
    if (entries.length === 0) throw new RangeError('keyring has no key');
    this.#keys = new Map();
    for (const [id, key] of entries) {
      if (!validKeyId(id)) throw new RangeError(`keyring key id "${id}": want 1 to 64 of [A-Za-z0-9_.-]`);
      if (key.length !== KEY) throw new RangeError(`keyring key "${id}": want 32 bytes`);
      this.#keys.set(id, Buffer.from(key));
    }
    if (primary && !this.#keys.has(primary)) throw new RangeError(`keyring primary "${primary}" is not a key of the keyring`);
    this.primary = primary || entries[entries.length - 1]![0];
  }

  /** Reads "id:base64" entries separated by commas or newlines (blank and #
   * lines skipped); the primary key is primary, or else the last entry. */
  static parse(text: string, primary?: string): Keyring {
    const keys = new Map<string, Buffer>();
    const entries = text.split(/[,\n]/).map((e) => e.trim()).filter((e) => e && !e.startsWith('#'));
    entries.forEach((entry, i) => {
      const at = entry.indexOf(':');
      const id = at < 0 ? '' : entry.slice(0, at).trim();
      if (!validKeyId(id)) throw new RangeError(`keyring entry ${i + 1}: want id:base64 with an id of 1 to 64 of [A-Za-z0-9_.-]`);
      let key: Buffer;
      try {
        key = unb64(entry.slice(at + 1).trim());
      } catch {
        key = Buffer.alloc(0);
      }
      if (key.length !== KEY) throw new RangeError(`keyring key "${id}": want the standard base64 of 32 bytes`);
      if (keys.has(id)) throw new RangeError(`keyring key "${id}" is listed twice`);
      keys.set(id, key);
    });
    return new Keyring(keys, primary);
  }

  /** The keyring of $SUNDIAL_KEYRING or $SUNDIAL_KEYRING_FILE, primary
   * $SUNDIAL_KEYRING_PRIMARY; undefined when neither is set. */
  static fromEnv(env: Record<string, string | undefined> = process.env): Keyring | undefined {
    const text = env.SUNDIAL_KEYRING ?? '';
    const file = env.SUNDIAL_KEYRING_FILE ?? '';
    const primary = env.SUNDIAL_KEYRING_PRIMARY || undefined;
    if (text && file) throw new RangeError('SUNDIAL_KEYRING and SUNDIAL_KEYRING_FILE are both set: set one');
    if (!text && !file) {
      if (primary) throw new RangeError('SUNDIAL_KEYRING_PRIMARY is set without SUNDIAL_KEYRING or SUNDIAL_KEYRING_FILE');
      return undefined;
    }
    const name = file ? 'SUNDIAL_KEYRING_FILE' : 'SUNDIAL_KEYRING';
    try {
      return Keyring.parse(file ? readFileSync(file, 'utf8') : text, primary);
    } catch (err) {
      throw new RangeError(`${name}: ${(err as Error).message}`);
    }
  }

  /** The key ids, in the order given. */
  get ids(): string[] {
    return [...this.#keys.keys()];
  }

  toString(): string {
    return `Keyring(${this.ids.join(',')} primary=${this.primary})`;
  }

  toJSON(): { ids: string[]; primary: string } {
    return { ids: this.ids, primary: this.primary };
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return this.toString();
  }

  /** Encrypts a JSON value as what under a fresh data key wrapped by the
   * primary key. */
  seal(what: Sealable, value: unknown): Encrypted {
    const dek = randomBytes(KEY);
    const wrapped = gcmSeal(this.#keys.get(this.primary)!, dek, `sundial.dek:${this.primary}`);
    const sealed = gcmSeal(dek, Buffer.from(JSON.stringify(value), 'utf8'), `sundial:${what}`);
    return {
      [ENC_FIELD]: {
        v: ENC_VERSION,
        kid: this.primary,
        dek: wrapped.toString('base64'),
        iv: sealed.subarray(0, NONCE).toString('base64'),
        ct: sealed.subarray(NONCE).toString('base64'),
      },
    };
  }

  /** Decrypts an encrypted value sealed as what and returns the JSON value.
   * Throws MissingKeyError for a key id the keyring lacks, EncryptionError
   * for what does not decrypt. */
  open(what: Sealable, value: unknown): unknown {
    const env = isEncrypted(value) ? (value[ENC_FIELD] as unknown as Record<string, unknown>) : undefined;
    const kid = env?.kid;
    if (!env || typeof env !== 'object' || typeof kid !== 'string' || !validKeyId(kid) ||
        Object.keys(env).sort().join() !== 'ct,dek,iv,kid,v') {
      throw new EncryptionError(`${what} is not a valid encrypted value`, what, undefined);
    }
    const bad = (reason: string): EncryptionError => new EncryptionError(`${what} encrypted with key "${kid}" does not decrypt: ${reason}`, what, kid);
    if (env.v !== ENC_VERSION) throw bad(`envelope version ${String(env.v)}, this SDK reads ${ENC_VERSION}`);
    const kek = this.#keys.get(kid);
    if (!kek) throw new MissingKeyError(what, kid);
    let wrapped: Buffer, iv: Buffer, ct: Buffer;
    try {
      [wrapped, iv, ct] = [unb64(env.dek), unb64(env.iv), unb64(env.ct)];
    } catch {
      throw bad('malformed dek, iv or ct');
    }
    if (iv.length !== NONCE || wrapped.length < NONCE) throw bad('malformed dek, iv or ct');
    let dek: Buffer;
    try {
      dek = gcmOpen(kek, wrapped.subarray(0, NONCE), wrapped.subarray(NONCE), `sundial.dek:${kid}`);
    } catch {
      throw bad('the data key does not unwrap (tampered with, or another key under this id)');
    }
    if (dek.length !== KEY) throw bad('the data key does not unwrap (tampered with, or another key under this id)');
    let plain: Buffer;
    try {
      plain = gcmOpen(dek, iv, ct, `sundial:${what}`);
    } catch {
      throw bad('the ciphertext does not authenticate (tampered with)');
    }
    return JSON.parse(plain.toString('utf8')) as unknown;
  }

  /** Encrypts a text (an error) as "$sundial_enc:" + base64(JSON). */
  sealText(what: Sealable, text: string): string {
    return ENC_TEXT_PREFIX + Buffer.from(JSON.stringify(this.seal(what, text)), 'utf8').toString('base64');
  }

  /** Decrypts a text sealText made, keeping words before it ("timeout after
   * 30s: $sundial_enc:..."); other text is returned as it is. */
  openText(what: Sealable, text: string): string {
    const i = text.indexOf(ENC_TEXT_PREFIX);
    if (i < 0) return text;
    let value: unknown;
    try {
      value = JSON.parse(unb64(text.slice(i + ENC_TEXT_PREFIX.length)).toString('utf8'));
    } catch {
      throw new EncryptionError(`${what} is not a valid encrypted text`, what, undefined);
    }
    const plain = this.open(what, value);
    if (typeof plain !== 'string') throw new EncryptionError(`${what} is not an encrypted text`, what, keyIdOf(value));
    return text.slice(0, i) + plain;
  }

  /** A copy of a job (as the API answers it) with its encrypted payload,
   * result and last error decrypted. */
  decryptJob<J extends { payload?: unknown; result?: unknown; last_error?: unknown }>(job: J): J {
    const out = { ...job };
    if (isEncrypted(out.payload)) out.payload = this.open('payload', out.payload);
    if (isEncrypted(out.result)) out.result = this.open('result', out.result);
    if (typeof out.last_error === 'string') out.last_error = this.openText('error', out.last_error);
    return out;
  }
}

/** A job spec with its payload sealed (unless absent or sealed already). */
export function sealSpec<S extends { payload?: unknown }>(keyring: Keyring | undefined, spec: S): S {
  if (!keyring || spec.payload === undefined || spec.payload === null || isEncrypted(spec.payload)) return spec;
  return { ...spec, payload: keyring.seal('payload', spec.payload) };
}
