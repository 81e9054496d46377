// The sources the dashboard's build (dist/app) is made from, each with its
// SHA-256, in sha256sum's format: "<hex>  <path>" per line, paths relative to
// web/, in byte order. The build is committed, so that the Go module carries
// the dashboard (go install and go build serve it with no Node); this list,
// written beside it as dist/sources.sha256, says which sources it was built
// from. web/embed_test.go (go test) and `npm test` fail when the sources no
// longer match it: run `npm run build` (or make web) and commit web/dist.
//
//   node scripts/sources.mjs          print the list for the sources as they are
//   node scripts/sources.mjs write    write it to dist/sources.sha256 (npm run build does)
//   node scripts/sources.mjs check    exit 1, naming the files, when dist/ is not built from them
//
// The set, kept the same in web/embed_test.go: index.html, package.json,
// package-lock.json, vite.config.ts, tsconfig*.json, every file under public/,
// and every file under src/ except tests (*.test.ts, *.test.tsx, src/test/).

import { createHash } from "node:crypto";
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const web = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const stamp = path.join(web, "dist/sources.sha256");

function walk(dir) {
  const abs = path.join(web, dir);
  if (!existsSync(abs)) return [];
  return readdirSync(abs, { withFileTypes: true }).flatMap((e) => {
    const rel = `${dir}/${e.name}`;
    return e.isDirectory() ? walk(rel) : e.isFile() ? [rel] : [];
  });
}

export function sourceFiles() {
  const top = readdirSync(web).filter((n) => /^(index\.html|package\.json|package-lock\.json|vite\.config\.ts|tsconfig.*\.json)$/.test(n));
  const src = walk("src").filter((f) => !/\.test\.tsx?$/.test(f) && !f.startsWith("src/test/"));
  // Byte order, as Go's sort.Strings (the paths are ASCII).
  return [...top, ...walk("public"), ...src].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

export function listing() {
  return sourceFiles()
    .map((f) => `${createHash("sha256").update(readFileSync(path.join(web, f))).digest("hex")}  ${f}\n`)
    .join("");
}

/** differences names the files whose line differs between two listings. */
export function differences(want, got) {
  const parse = (s) => new Map(s.split("\n").filter(Boolean).map((l) => [l.slice(66), l.slice(0, 64)]));
  const [w, g] = [parse(want), parse(got)];
  const out = [];
  for (const [f, h] of g) {
    if (!w.has(f)) out.push(`added since the build: ${f}`);
    else if (w.get(f) !== h) out.push(`changed since the build: ${f}`);
  }
  for (const f of w.keys()) if (!g.has(f)) out.push(`removed since the build: ${f}`);
  return out;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const cmd = process.argv[2] ?? "print";
  const now = listing();
  if (cmd === "print") process.stdout.write(now);
  else if (cmd === "write") writeFileSync(stamp, now);
  else if (cmd === "check") {
    if (!existsSync(stamp)) {
      console.error("web/dist/sources.sha256 is missing: run `npm run build` in web/ (or make web) and commit web/dist");
      process.exit(1);
    }
    const diff = differences(readFileSync(stamp, "utf8"), now);
    if (diff.length) {
      console.error(`web/dist/app was not built from the sources as they are (web/dist/sources.sha256):\n  ${diff.join("\n  ")}\n` +
        "run `npm run build` in web/ (or make web) and commit web/dist");
      process.exit(1);
    }
    console.log(`web/dist/app is built from the sources as they are (${now.split("\n").length - 1} files)`);
  } else {
    console.error(`unknown command ${cmd}: print, write or check`);
    process.exit(2);
  }
}
