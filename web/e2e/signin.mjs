// The dashboard's sign-in with OpenID Connect, in Chromium through a real
// provider's pages: internal/oidctest/provider (zitadel/oidc's op package,
// signing its own tokens) and a second API over the stack's Redis and
// MongoDB, configured with SUNDIAL_OIDC_* and a program's key. An admin
// signs in, pauses a queue through the page (the CSRF token travels), is
// named in the audit log, and signs out; a viewer's pause is refused; an
// operator limited to queue patterns sees no other queue; axe checks the
// page with the sign-in offered.

import { execFileSync } from "node:child_process";
import path from "node:path";
import { freePort, waitFor } from "./stack.mjs";
import { axePage, describe, failing } from "./a11y.mjs";

const programKey = "e2e-program-key-0123456789";

export async function signInFlow({ stack, browser, step, check, repo }) {
  let base;
  await step("a second API with sign-in, and the test provider", async () => {
    const bin = path.join(stack.dir, "provider");
    execFileSync("go", ["build", "-o", bin, "./internal/oidctest/provider"], { cwd: repo, stdio: "inherit" });
    const [apiPort, providerPort] = [await freePort(), await freePort()];
    base = `http://127.0.0.1:${apiPort}`;
    const issuer = `http://127.0.0.1:${providerPort}`;
    stack.spawn("provider", bin, ["-addr", `127.0.0.1:${providerPort}`, "-client-id", "sundial", "-client-secret", "e2e-client-secret-0123456789",
      "-redirect", `${base}/auth/callback`, "-user", "ann=sundial-admins", "-user", "vera=staff", "-user", "otto=billing-team"], {});
    await waitFor("the provider", async () => (await fetch(issuer + "/.well-known/openid-configuration").catch(() => null))?.ok, { timeoutMs: 30_000 });
    stack.spawn("api-signin", path.join(stack.bin, "api"), [], {
      env: {
        ...stack.env, SUNDIAL_HTTP_ADDR: `127.0.0.1:${apiPort}`, SUNDIAL_API_KEYS: programKey,
        SUNDIAL_OIDC_ISSUER: issuer, SUNDIAL_OIDC_CLIENT_ID: "sundial", SUNDIAL_OIDC_CLIENT_SECRET: "e2e-client-secret-0123456789",
        SUNDIAL_OIDC_REDIRECT_URL: `${base}/auth/callback`, SUNDIAL_OIDC_ROLES: "sundial-admins=admin,staff=viewer,billing-team=operator@e2e-signin*",
      },
    });
    await waitFor("the API with sign-in", async () => (await fetch(base + "/readyz").catch(() => null))?.ok, { timeoutMs: 60_000 });
    for (const queue of ["e2e-signin", "e2e-hidden"]) {
      const r = await fetch(base + "/v1/jobs", { method: "POST", headers: { Authorization: `Bearer ${programKey}`, "Content-Type": "application/json" },
        body: JSON.stringify({ queue, type: "e2e.t", delay_seconds: 3600 }) });
      check(r.status === 201, `submit: ${r.status}`);
    }
  });
  if (!base) return;
  const api = async (p) => (await fetch(base + p, { headers: { Authorization: `Bearer ${programKey}` } })).json();

  const ctx = await browser.newContext({ viewport: { width: 1366, height: 860 }, bypassCSP: true });
  const page = await ctx.newPage();
  page.setDefaultTimeout(20_000);
  const signIn = async (user) => {
    await page.goto(base + "/queues");
    const link = page.getByRole("link", { name: "Sign in with your identity provider" });
    await link.waitFor();
    await link.click();
    await page.getByRole("heading", { name: "Sign in" }).waitFor();
    await page.getByLabel("User name").fill(user);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(base + "/queues");
    await page.getByRole("button", { name: "Sign out" }).waitFor();
  };

  await step("sign-in is offered on a 401, and the page is axe clean", async () => {
    await page.goto(base + "/queues");
    await page.getByRole("link", { name: "Sign in with your identity provider" }).waitFor();
    const { violations } = await axePage(page);
    const bad = violations.filter((v) => failing.has(v.impact));
    check(bad.length === 0, `${bad.length} serious or critical violations:\n    ${describe(bad)}`);
  });
  await step("an admin signs in through the provider's pages and pauses a queue (CSRF token sent)", async () => {
    await signIn("ann");
    const cookies = await ctx.cookies(base);
    const sess = cookies.find((c) => c.name === "sundial_session");
    check(sess && sess.httpOnly && sess.sameSite === "Lax", `session cookie ${JSON.stringify(sess)}`);
    await page.getByRole("button", { name: "Pause queue e2e-signin" }).click();
    await page.getByRole("button", { name: "Resume queue e2e-signin" }).waitFor();
    const q = await api("/v1/queues/e2e-signin");
    check(q.paused === true, `queue not paused: ${JSON.stringify(q)}`);
    const audit = await api("/v1/audit?action=queue.pause");
    const rec = audit.records?.[0];
    check(rec?.actor?.kind === "user" && rec.actor.id === "ann" && rec.outcome === "ok", `audit: ${JSON.stringify(audit)}`);
    const signins = await api("/v1/audit?action=auth.signin&actor=ann");
    check(signins.records?.length === 1, `sign-in records: ${JSON.stringify(signins)}`);
  });
  await step("sign-out ends the session", async () => {
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("link", { name: "Sign in with your identity provider" }).waitFor();
    const cookies = await ctx.cookies(base);
    check(!cookies.some((c) => c.name === "sundial_session"), "the session cookie is still there");
  });
  await step("a viewer signs in and cannot pause", async () => {
    await signIn("vera");
    await page.getByRole("button", { name: "Resume queue e2e-signin" }).click();
    await page.getByText(/lacks the operate scope/).waitFor();
    const q = await api("/v1/queues/e2e-signin");
    check(q.paused === true, "the viewer resumed the queue");
  });
  await step("an operator limited to e2e-signin* sees nothing of another queue in the dashboard", async () => {
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("link", { name: "Sign in with your identity provider" }).waitFor();
    await signIn("otto");
    await page.locator('[data-queue="e2e-signin"]').waitFor();
    await page.locator('[data-testid=connection][data-state=ok]').waitFor();
    // The stream's stats have arrived (connected): still no other queue.
    check(await page.locator('[data-queue="e2e-hidden"]').count() === 0, "the operator sees e2e-hidden");
    const html = await page.content();
    check(!html.includes("e2e-hidden"), "the page names e2e-hidden");
    await page.goto(base + "/jobs?queue=e2e-hidden&state=scheduled");
    await page.getByRole("heading", { name: "Jobs" }).waitFor();
    await page.getByText(/not found/).first().waitFor();
  });
  await ctx.close();
}
