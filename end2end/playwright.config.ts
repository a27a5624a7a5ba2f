import { defineConfig } from '@playwright/test';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// The built binary is started exactly as a user would from the repo root, on a
// port scripts/test.sh picked, with a throw-away data directory.
const port = Number(process.env.RUNCELL_E2E_PORT ?? 3310);
const dataDir = process.env.RUNCELL_E2E_DATA ?? mkdtempSync(join(tmpdir(), 'runcell-e2e-'));
// The OpenID provider people sign in with (oidc/provider.mjs), on a port of
// its own: scripts/test.sh picks a free one; by hand, the next port up.
const oidcPort = Number(process.env.RUNCELL_E2E_OIDC_PORT ?? port + 1);
const oidcIssuer = `http://127.0.0.1:${oidcPort}`;
// runcell's client at the provider, as an organisation would register it:
// the secret is the tests' own, the callback is this server's.
const oidcClient = { id: 'runcell-e2e', secret: 'e2e-client-secret' };

// Debian's Chromium, as root, on a machine with no outside network.
const chromiumArgs = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export default defineConfig({
  testDir: './tests',
  fullyParallel: true,
  forbidOnly: true,
  // One retry, reported as "flaky" in the log (never counted as passed):
  // under CI's load a page was once rendered without its request's context
  // (no nonce, so its scripts were refused; issue 41's closing note). A
  // failure that repeats still fails the run.
  retries: 1,
  workers: 2,
  timeout: 30_000,
  expect: { timeout: 10_000 },
  reporter: [['list']],
  use: {
    baseURL: `http://127.0.0.1:${port}`,
    launchOptions: { executablePath: '/usr/bin/chromium', args: chromiumArgs },
    trace: 'retain-on-failure',
  },
  // Every spec runs twice: server-rendered only, and hydrated.
  projects: [
    { name: 'no-js', use: { javaScriptEnabled: false } },
    { name: 'hydrated', use: { javaScriptEnabled: true } },
  ],
  webServer: [
    // The OpenID provider first (runcell reads its discovery document at the
    // first sign-in). Its login page takes any login: accounts.spec.ts signs
    // in as a login of its own per test. Playwright holds the provider's
    // stdin open as a pipe (its webServer commands are spawned with piped
    // stdio, never a closed stdin), so provider.mjs's exit when stdin closes
    // happens only when the run ends, as for the Rust tests.
    {
      name: 'oidc',
      command:
        `exec node oidc/provider.mjs --port ${oidcPort} ` +
        `--client ${oidcClient.id}:${oidcClient.secret}:http://127.0.0.1:${port}/auth/oidc/callback`,
      url: `${oidcIssuer}/.well-known/openid-configuration`,
      reuseExistingServer: false,
      timeout: 30_000,
      // Its one line (the issuer) is not needed: the port is fixed here.
      stdout: 'ignore',
      stderr: 'pipe',
    },
    // E2B is offered too: the server's own E2B-compatible endpoints stand in
    // for E2B's cloud, with a key made before the server starts.
    {
      name: 'runcell',
      command:
        `key=$(./target/release/runcell keys create --name e2e-e2b --data-dir ${dataDir} | tail -n 1) && ` +
        `E2B_API_KEY="$key" E2B_API_URL=http://127.0.0.1:${port} E2B_SANDBOX_URL=http://127.0.0.1:${port} ` +
        `exec ./target/release/runcell serve --addr 127.0.0.1:${port} --data-dir ${dataDir}`,
      cwd: '..',
      url: `http://127.0.0.1:${port}/healthz`,
      reuseExistingServer: false,
      // Every test opens sessions of its own, and each holds a kernel: idle
      // ones close after 30 s (not fifteen minutes), so that a whole run stays
      // under the server's 32 open kernels. Every test's page is an anonymous
      // visitor from 127.0.0.1, standing in for many people: the anonymous
      // pages' share of the kernels (half, four per address) is theirs whole.
      env: {
        RUNCELL_LOG: process.env.RUNCELL_LOG ?? 'warn',
        RUNCELL_LLM: 'scripted',
        RUNCELL_SANDBOX__SESSION_IDLE_SECS: '30',
        RUNCELL_SANDBOX__ANONYMOUS_SHARE_PERCENT: '100',
        RUNCELL_SANDBOX__ANONYMOUS_SESSIONS_PER_CLIENT: '32',
        // The same visitors make new sessions far faster than 30 people on
        // one address would (two workers, a fresh cookie per test, several
        // sessions a test): their address's budget a minute is out of the
        // way, as the Rust tests' is (support::LOOPBACK_NEW_SESSIONS).
        RUNCELL_NOTEBOOK__ANONYMOUS_SESSIONS_PER_MINUTE: '6000',
        // Sign-in with the provider above, offered beside the anonymous
        // pages (loopback: the pages stay open). Admins are named by email:
        // one admin login per project, so the two projects' admin tests
        // never change the same person at once.
        RUNCELL_AUTH__OIDC__ISSUER: oidcIssuer,
        RUNCELL_AUTH__OIDC__CLIENT_ID: oidcClient.id,
        RUNCELL_AUTH__OIDC__CLIENT_SECRET: oidcClient.secret,
        RUNCELL_AUTH__OIDC__NAME: 'Example ID',
        RUNCELL_AUTH__ADMINS: 'alice@example.test,ada@example.test',
      },
      timeout: 60_000,
      stdout: 'ignore',
      stderr: 'pipe',
    },
  ],
});
