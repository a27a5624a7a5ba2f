// JupyterLab itself, in Debian's Chromium, on runcell's kernel gateway: the
// lab server started in gateway mode (`--gateway-url` at runcell's /jupyter,
// the key as `GatewayClient.auth_token`), a Python notebook opened on the
// gateway's `python3` kernel, and what a person sees checked in the page:
//
// 1. after a cell `x_unique_name = 1` ran, `x_unique_n` then Tab in the next
//    cell completes to `x_unique_name` (complete_request to the kernel);
// 2. a display updated through its handle shows `v2`, not `v1`
//    (update_display_data);
// 3. `print('a')`, `clear_output()`, `print('b')` leaves only `b`
//    (clear_output).
//
// Usage: node jupyterlab_check.mjs <runcell /jupyter URL> <API key> <python>
//   where <python> is a Python with jupyterlab installed (the API clients'
//   venv). PLAYWRIGHT_CORE names playwright-core's directory (default: the
//   checkout's end2end/node_modules/playwright-core); no browser is fetched,
//   Debian's /usr/bin/chromium is driven.
//
// Prints `ok: ...` or `FAILED: ...` for each check, runs them all, and exits
// non-zero if any failed; on a failure the page's screenshot and the lab
// server's log are kept in a temporary directory it names.

import { spawn } from 'node:child_process';
import { createWriteStream, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';

const [gateway, key, python] = process.argv.slice(2);
if (!gateway || !key || !python) {
  console.error('usage: node jupyterlab_check.mjs <runcell /jupyter URL> <API key> <python>');
  process.exit(2);
}
const here = dirname(fileURLToPath(import.meta.url));
const playwrightDir =
  process.env.PLAYWRIGHT_CORE ?? join(here, '../../../end2end/node_modules/playwright-core');
const { chromium } = createRequire(join(playwrightDir, 'package.json'))('playwright-core');

// Two cores shared with a build: every wait is generous.
const LOAD_MS = 180_000;
const CELL_MS = 120_000;

const work = mkdtempSync(join(tmpdir(), 'runcell-jupyterlab-'));
const failures = [];

function say(ok, what, detail) {
  if (ok) {
    console.log(`ok: ${what}${typeof detail === 'string' ? ` (${detail})` : ''}`);
  } else {
    console.log(`FAILED: ${what}: ${JSON.stringify(detail)}`);
    failures.push(what);
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

// The notebook JupyterLab opens: its kernelspec is the gateway's `python3`
// (no kernel picker), its first cell holds the name the completion looks
// for, the second is where it is typed.
const CELLS = [
  'x_unique_name = 1',
  '',
  "from IPython.display import display; import time; h = display('v1', display_id=True); time.sleep(1); h.update('v2')",
  "print('a'); from IPython.display import clear_output; clear_output(); print('b')",
];

function writeNotebook(root) {
  const notebook = {
    nbformat: 4,
    nbformat_minor: 5,
    metadata: {
      kernelspec: { name: 'python3', display_name: 'Python 3 (runcell)', language: 'python' },
      language_info: { name: 'python' },
    },
    cells: CELLS.map((source, i) => ({
      cell_type: 'code',
      id: `cell-${i}`,
      metadata: {},
      execution_count: null,
      outputs: [],
      source,
    })),
  };
  writeFileSync(join(root, 'check.ipynb'), JSON.stringify(notebook, null, 1));
}

/** Starts JupyterLab in gateway mode on 127.0.0.1; resolves once it answers. */
async function startLab(port, token) {
  const root = join(work, 'root');
  mkdirSync(root);
  writeNotebook(root);
  // Not asked about Jupyter's news (a toast over the notebook).
  const notification = join(work, 'settings/@jupyterlab/apputils-extension');
  mkdirSync(notification, { recursive: true });
  writeFileSync(join(notification, 'notification.jupyterlab-settings'), '{"fetchNews": "false"}');
  const logPath = join(work, 'jupyterlab.log');
  const log = createWriteStream(logPath);
  const env = {
    ...process.env,
    JUPYTER_CONFIG_DIR: join(work, 'config'),
    JUPYTER_DATA_DIR: join(work, 'data'),
    JUPYTER_RUNTIME_DIR: join(work, 'runtime'),
    JUPYTERLAB_SETTINGS_DIR: join(work, 'settings'),
    JUPYTERLAB_WORKSPACES_DIR: join(work, 'workspaces'),
    JUPYTER_PLATFORM_DIRS: '1',
  };
  delete env.JUPYTER_GATEWAY_URL;
  delete env.JUPYTER_GATEWAY_AUTH_TOKEN;
  const lab = spawn(
    python,
    [
      '-m', 'jupyterlab', '--no-browser', '--allow-root',
      '--ServerApp.ip=127.0.0.1', `--ServerApp.port=${port}`, '--ServerApp.port_retries=0',
      `--IdentityProvider.token=${token}`, `--ServerApp.root_dir=${root}`,
      `--gateway-url=${gateway}`, `--GatewayClient.auth_token=${key}`,
      '--GatewayClient.connect_timeout=30', '--GatewayClient.request_timeout=120',
      // Nothing reached outside this machine: no update check, no news.
      '--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate',
      '--LabApp.news_url=None',
    ],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  lab.stdout.pipe(log, { end: false });
  lab.stderr.pipe(log, { end: false });
  const closeLog = () => new Promise((resolve) => log.end(resolve));
  const failed = async (why) => {
    await stop(lab);
    await closeLog();
    return new Error(`${why}; the lab's log:\n${readFileSync(logPath, 'utf8')}`);
  };
  const deadline = Date.now() + LOAD_MS;
  while (Date.now() < deadline) {
    if (!running(lab)) throw await failed(`JupyterLab stopped (${lab.exitCode ?? lab.signalCode})`);
    let answer = null;
    try {
      answer = await fetch(`http://127.0.0.1:${port}/api/kernelspecs`, {
        headers: { Authorization: `token ${token}` },
      });
    } catch {
      // not listening yet
    }
    if (answer) {
      // The lab asks the gateway for its kernel specs.
      const specs = await answer.text();
      if (answer.ok && JSON.parse(specs).kernelspecs?.python3) return { lab, logPath, closeLog };
      throw await failed(`no python3 kernelspec through the gateway: ${answer.status} ${specs}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  throw await failed(`JupyterLab did not answer within ${LOAD_MS} ms`);
}

const running = (child) => child.exitCode === null && child.signalCode === null;

/** Stops the lab server (it shuts its kernels down on the gateway). */
async function stop(lab) {
  if (!running(lab)) return;
  const exited = new Promise((resolve) => lab.once('exit', resolve));
  lab.kill('SIGTERM');
  const late = setTimeout(() => lab.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(late);
}

const cellAt = (page, i) => page.locator('.jp-Notebook .jp-Cell').nth(i);

/** Runs cell `i` (Shift+Enter in its editor) and waits for its `[n]:`. */
async function runCell(page, i) {
  const cell = cellAt(page, i);
  await cell.locator('.cm-content').click();
  await page.keyboard.press('Shift+Enter');
  await cell
    .locator('.jp-InputPrompt')
    .filter({ hasText: /\[\d+\]/ })
    .waitFor({ timeout: CELL_MS });
  return cell;
}

/** The text of cell `i`'s output area (all its outputs). */
async function outputText(page, i) {
  const outputs = cellAt(page, i).locator('.jp-OutputArea-output');
  return (await outputs.allInnerTexts()).join('\n').trim();
}

/** Polls `probe` until it answers `[true, detail]` or `ms` pass; its last answer. */
async function until(page, ms, probe) {
  const deadline = Date.now() + ms;
  for (;;) {
    const answer = await probe();
    if (answer[0] || Date.now() > deadline) return answer;
    await page.waitForTimeout(250);
  }
}

async function shot(page, name) {
  const path = join(work, `${name}.png`);
  await page.screenshot({ path, fullPage: true }).catch(() => {});
  return path;
}

/** Runs `check` and reports it; a thrown error is its failure. */
async function check(page, what, name, body) {
  try {
    const [ok, detail] = await body();
    if (!ok) detail.screenshot = await shot(page, name);
    say(ok, what, detail);
  } catch (error) {
    say(false, what, { error: String(error).split('\n')[0], screenshot: await shot(page, name) });
  }
}

const started = Date.now();
const token = randomBytes(16).toString('hex');
const port = await freePort();
const { lab, logPath, closeLog } = await startLab(port, token);
let browser;
let page;
try {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: [
      '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
  });
  page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.setDefaultTimeout(CELL_MS);
  await page.goto(`http://127.0.0.1:${port}/lab/tree/check.ipynb?token=${token}`, {
    timeout: LOAD_MS,
  });
  // The notebook is open and its kernel (runcell's python3) connected and
  // idle, as the status bar says. The toolbar's execution indicator says
  // idle before the kernel's socket is up, and a cell run then was left
  // unrun (`[ ]:` again) in 2 of 3 runs against a kernel that
  // starts cold.
  await page.locator('.jp-Notebook .jp-Cell').nth(CELLS.length - 1).waitFor({ timeout: LOAD_MS });
  await page
    .locator('#jp-main-statusbar', { hasText: /\(runcell\) \| Idle/ })
    .waitFor({ timeout: LOAD_MS });
  const kernel = page.locator('.jp-Toolbar-kernelName', { hasText: '(runcell)' }).first();
  await kernel.waitFor({ timeout: LOAD_MS });
  say(true, "the notebook opened on the gateway's python3 kernel", await kernel.innerText());
  console.log(`opened in ${Date.now() - started} ms`);

  await check(page, 'Tab completes x_unique_n to x_unique_name', 'complete', async () => {
    await runCell(page, 0);
    const editor = cellAt(page, 1).locator('.cm-content');
    await editor.click();
    await page.keyboard.type('x_unique_n');
    await page.keyboard.press('Tab');
    // The match is inserted at once, or listed in the completer and taken
    // from it with a click (as a person would).
    const listed = page.locator('.jp-Completer .jp-Completer-item', { hasText: 'x_unique_name' });
    let names = null;
    return until(page, 30_000, async () => {
      const text = (await editor.innerText()).trim();
      if (text === 'x_unique_name') return [true, names ? `listed: ${names}; taken` : 'inserted'];
      if (!names && (await listed.count())) {
        names = (await page.locator('.jp-Completer .jp-Completer-match').allInnerTexts()).join(', ');
        await listed.first().click();
      }
      return [false, { editor: text, listed: names }];
    });
  });

  await check(page, 'an updated display shows v2, not v1', 'update-display', async () => {
    await runCell(page, 2);
    // The update came before the reply; it is given a few seconds to show.
    return until(page, 10_000, async () => {
      const text = await outputText(page, 2);
      return [text.includes('v2') && !text.includes('v1'), { output: text }];
    });
  });

  await check(page, 'clear_output leaves only b', 'clear-output', async () => {
    await runCell(page, 3);
    return until(page, 10_000, async () => {
      const text = await outputText(page, 3);
      return [text === 'b', { output: text }];
    });
  });
} catch (error) {
  say(false, 'JupyterLab opened the notebook', {
    error: String(error).split('\n')[0],
    screenshot: page ? await shot(page, 'open') : null,
  });
} finally {
  await browser?.close().catch(() => {});
  await stop(lab);
  await closeLog();
}
console.log(`took ${Date.now() - started} ms`);
if (failures.length) {
  console.log(`kept in ${work} (screenshots, jupyterlab.log); the lab's log ends:`);
  console.log(readFileSync(logPath, 'utf8').split('\n').slice(-30).join('\n'));
  process.exit(1);
}
rmSync(work, { recursive: true, force: true });
console.log('ok: JupyterLab in Chromium through the gateway');
