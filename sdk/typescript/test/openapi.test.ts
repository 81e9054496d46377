// src/openapi.ts is what openapi-typescript makes of the served OpenAPI
// document (pkg/httpapi/openapi.json), with the options of npm run
// generate: regenerated here and compared, so the SDK's types cannot drift.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const pkg = fileURLToPath(new URL('../..', import.meta.url));

test('src/openapi.ts is up to date with pkg/httpapi/openapi.json', () => {
  const scripts = (JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
  const args = scripts.generate!.split(/\s+/);
  assert.equal(args[0], 'openapi-typescript');
  const out = args.indexOf('-o');
  assert.equal(args[out + 1], 'src/openapi.ts');
  const dir = mkdtempSync(join(tmpdir(), 'sundial-openapi-'));
  try {
    args[out + 1] = join(dir, 'openapi.ts');
    execFileSync(join(pkg, 'node_modules', '.bin', 'openapi-typescript'), args.slice(1), { cwd: pkg, stdio: 'pipe' });
    const fresh = readFileSync(join(dir, 'openapi.ts'), 'utf8');
    const committed = readFileSync(join(pkg, 'src', 'openapi.ts'), 'utf8');
    assert.ok(fresh === committed, 'src/openapi.ts differs from what pkg/httpapi/openapi.json generates: run npm run generate in sdk/typescript');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
