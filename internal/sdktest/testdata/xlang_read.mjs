// Reads in TypeScript: gets the jobs named on the command line through the
// API with the SDK (its dist/index.js the first argument), decrypts them
// with the keyring of SUNDIAL_KEYRING, and prints the raw and decrypted
// jobs as JSON (TestEncryptionAcrossLanguages).
import { pathToFileURL } from 'node:url';

const [sdk, ...ids] = process.argv.slice(2);
const { Client, Keyring } = await import(pathToFileURL(sdk).href);
const c = new Client({ keyring: Keyring.fromEnv() });
const out = {};
for (const id of ids) {
  const raw = await c.get(id);
  out[id] = { raw, plain: c.decrypt(raw) };
}
console.log(JSON.stringify(out));
