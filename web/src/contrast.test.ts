// The theme colours' contrast ratios (WCAG 2.1, 1.4.3): every text colour on
// each background the stylesheet puts it on is at least 4.5:1, in the light
// and the dark theme. The e2e checks the rendered pages with axe-core; this
// checks every pair, including those no page shows while the e2e runs (a
// warning banner, a paused badge, the danger button).

import { describe, expect, it } from "vitest";
import css from "./styles.css?raw";

function vars(selector: string): Record<string, string> {
  const start = css.indexOf(selector + " {");
  if (start < 0) throw new Error(`no ${selector} block in styles.css`);
  const block = css.slice(start, css.indexOf("}", start));
  return Object.fromEntries([...block.matchAll(/--([\w-]+):\s*(#[0-9a-fA-F]{6})\b/g)].map((m) => [m[1], m[2]]));
}

const light = vars(":root");
const dark = { ...light, ...vars(':root[data-theme="dark"]') };

function luminance(hex: string): number {
  const [r, g, b] = [1, 3, 5].map((i) => {
    const c = parseInt(hex.slice(i, i + 2), 16) / 255;
    return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

function contrast(a: string, b: string): number {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}

// [text, background]: a variable name, or a literal colour.
const pairs: [string, string][] = [
  ...["bg", "panel", "panel-2", "accent-bg", "warn-bg", "bad-bg", "good-bg", "info-bg"].flatMap((bg): [string, string][] => [
    ["text", bg],
    ["muted", bg],
    ["link", bg],
  ]),
  // Badges, banners, the connection indicator, counts.
  ["good", "good-bg"],
  ["bad", "bad-bg"],
  ["info", "info-bg"],
  ["accent", "accent-bg"],
  ["warn", "warn-bg"],
  // Coloured text on panels: errors, stats, current tab, throttled counts.
  ...["bad", "warn", "good", "accent", "info"].flatMap((fg): [string, string][] => [
    [fg, "panel"],
    [fg, "bg"],
    [fg, "panel-2"],
  ]),
];

describe.each([
  ["light", light, "#ffffff", "#ffffff"],
  ["dark", dark, "#1a1205", "#2a0b0b"],
])("the %s theme", (_name, theme, primaryText, dangerText) => {
  const color = (v: string) => (v.startsWith("#") ? v : theme[v]);
  it.each(pairs)("%s on %s is at least 4.5:1", (fg, bg) => {
    expect(color(fg), fg).toMatch(/^#/);
    expect(color(bg), bg).toMatch(/^#/);
    expect(contrast(color(fg), color(bg))).toBeGreaterThanOrEqual(4.5);
  });
  it("a primary and a danger button's text is at least 4.5:1", () => {
    expect(contrast(primaryText, theme.accent)).toBeGreaterThanOrEqual(4.5);
    expect(contrast(dangerText, theme.bad)).toBeGreaterThanOrEqual(4.5);
  });
  it("the connection dot (a graphic, 1.4.11) is at least 3:1", () => {
    expect(contrast(theme.off, theme.panel)).toBeGreaterThanOrEqual(3);
    expect(contrast(theme.good, theme.panel)).toBeGreaterThanOrEqual(3);
  });
  it("the button text colours are the stylesheet's", () => {
    expect(css).toContain(`color: ${dangerText === "#ffffff" ? "#fff" : dangerText}`);
    expect(css).toContain(`color: ${primaryText === "#ffffff" ? "#fff" : primaryText}`);
  });
});
