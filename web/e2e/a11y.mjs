// Accessibility: axe-core (WCAG 2.1 A and AA rules) over every page of the
// dashboard in both themes, against the real stack and the seeded data of
// the screenshots. A violation of impact serious or critical fails the run;
// every violation (all impacts) is written to e2e/out/a11y.json.
//
// axe is injected as an inline script, which the dashboard's CSP
// (script-src 'self') refuses: the contexts here are made with bypassCSP.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const axeSource = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

export const tags = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"];
export const failing = new Set(["serious", "critical"]);

/**
 * axePage runs axe in page (already loaded and settled) and returns its
 * violations and the checks axe could not decide (incomplete, for a person
 * to review), each [{id, impact, help, nodes: [{target, summary}]}].
 */
export async function axePage(page) {
  if (!(await page.evaluate(() => typeof window.axe === "object"))) await page.addScriptTag({ content: axeSource });
  return page.evaluate(async (values) => {
    const r = await window.axe.run(document, { runOnly: { type: "tag", values }, resultTypes: ["violations", "incomplete"] });
    const brief = (list) => list.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.map((n) => ({ target: n.target.join(" "), summary: n.failureSummary })),
    }));
    return { violations: brief(r.violations), incomplete: brief(r.incomplete) };
  }, tags);
}

/** describe formats violations for a failure message, a few nodes each. */
export function describe(violations) {
  return violations
    .map((v) => `${v.impact} ${v.id} (${v.nodes.length}): ${v.help}\n` +
      v.nodes.slice(0, 4).map((n) => `      ${n.target}: ${(n.summary ?? "").split("\n").slice(1, 2).join(" ").trim()}`).join("\n"))
    .join("\n    ");
}
