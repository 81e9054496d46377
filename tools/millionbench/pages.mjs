// pages.mjs measures how long the dashboard's pages take to show their data
// in Chromium against a running API (tools/millionbench runs it after the
// fill): from navigation start until the page shows what an operator came
// for — every queue's row on the overview, every queue's card on the queues
// page, the first job of the live list. Each page is loaded -loads times in
// a fresh tab; the median and the slowest are printed as a markdown table.
//
//	node tools/millionbench/pages.mjs http://127.0.0.1:8080 20 [loads]
//
// playwright-core comes from web/node_modules (cd web && npm ci);
// CHROMIUM names the browser (default /usr/bin/chromium).

import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../../web/package.json"));
const { chromium } = require("playwright-core");

const [base, queuesArg, loadsArg] = process.argv.slice(2);
if (!base) {
  console.error("usage: node pages.mjs BASE_URL QUEUES [LOADS]");
  process.exit(2);
}
const queues = Number(queuesArg ?? 20);
const loads = Number(loadsArg ?? 5);

const pages = [
  { name: "overview (/): every queue's row", path: "/", ready: async (p) => p.locator("tr[data-queue]").nth(queues - 1).waitFor() },
  { name: "queues (/queues): every queue's card", path: "/queues", ready: async (p) => p.locator("article[data-queue]").nth(queues - 1).waitFor() },
  { name: "jobs, live list of load-00 (queued): the first row", path: "/jobs?queue=load-00&state=queued", ready: async (p) => p.locator("[data-job]").first().waitFor() },
  { name: "dead letters of load-dead: the first row", path: "/dead/load-dead", ready: async (p) => p.locator("[data-job]").first().waitFor(), optional: true },
];

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-dev-shm-usage"],
});
const ctx = await browser.newContext({ viewport: { width: 1366, height: 860 } });
console.log(`| page (${loads} loads each, fresh tab) | median | slowest |`);
console.log("|---|---:|---:|");
try {
  for (const pg of pages) {
    const times = [];
    for (let i = 0; i < loads; i++) {
      const tab = await ctx.newPage();
      tab.setDefaultTimeout(30_000);
      const t0 = Date.now();
      try {
        await tab.goto(base + pg.path, { waitUntil: "commit" });
        await pg.ready(tab);
        times.push(Date.now() - t0);
      } catch (e) {
        if (!pg.optional) throw e;
      } finally {
        await tab.close();
      }
    }
    if (times.length === 0) continue;
    times.sort((a, b) => a - b);
    console.log(`| ${pg.name} | ${times[Math.floor(times.length / 2)]} ms | ${times[times.length - 1]} ms |`);
  }
} finally {
  await browser.close();
}
