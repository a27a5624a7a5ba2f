import { test as plain } from '@playwright/test';
import { test, expect } from './fixtures';

// Issue 41, point 1: whatever a stored history holds, however its turns
// ended (stopped mid-attempt, cut short by a dead server, withdrawn,
// failed), its page renders on the server and comes to life in the browser.
// Random histories, cut at random points, go in through the history import
// (`POST /api/sessions/import` takes what `…/events` gives) and each page
// must hydrate without an error. The seed is printed, so a failure can be
// replayed with RUNCELL_E2E_SEED.

type Body = Record<string, unknown>;

/** A small, seedable generator (mulberry32). */
function random(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(items: T[]): T => items[int(items.length)];
  const chance = (p: number) => next() < p;
  return { next, int, pick, chance };
}
type Rng = ReturnType<typeof random>;

const TEXTS = [
  '',
  ' ',
  '\n',
  'how many r\'s are in strawberry?',
  'Plot **sales** by month\n```python\nprint(6 * 7)\n```',
  'The total is $x^2 + 1$ and $$\\sum_i i$$',
  '| a | b |\n|---|---|\n| 1 | 2 |',
  '<script>alert(1)</script><img src=x onerror=alert(2)>',
  '\u001b[31mred\u001b[0m and \u001b[1;32mbold green\u001b[0m',
  'ünïcödé 😀 中文 \u200b',
  'line one\n\n\nline four   ',
  '- item\n- item\n\n> quote',
];

const CODES = ['print(6 * 7)', 'import pandas as pd\ndf = pd.DataFrame({"a": [1, 2]})\ndf', '', 'x = 1\n\n\n', 'for i in range(3):\n    print(i)'];

const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

function output(r: Rng): Body {
  switch (r.int(8)) {
    case 0:
      return { type: 'stdout', text: r.pick(TEXTS) };
    case 1:
      return { type: 'stderr', text: r.pick(TEXTS) };
    case 2:
      return { type: 'error', name: r.pick(['ZeroDivisionError', 'KeyError', '']), value: r.pick(TEXTS), traceback: r.chance(0.5) ? [r.pick(TEXTS)] : [] };
    case 3:
      return { type: 'rich', data: { 'image/png': PNG, 'text/plain': '<Figure>' } };
    case 4:
      return { type: 'rich', data: { 'text/html': '<b>bold</b> <i>and</i> <table><tr><td>1</td></tr></table>', 'text/plain': 'html' } };
    case 5:
      return {
        type: 'rich',
        data: { 'application/vnd.plotly.v1+json': JSON.stringify({ data: [{ type: 'bar', x: ['a', 'b'], y: [1, 2] }], layout: {} }) },
      };
    case 6: {
      const rows = Array.from({ length: r.int(5) }, (_, i) => [String(i), r.pick(['1', '2.5', 'NaN', 'x', ''])]);
      return { type: 'table', table: { columns: ['', 'a'], index_columns: 1, rows, ...(r.chance(0.3) ? { elided: '200 rows × 1 columns' } : {}) }, text: 'a table' };
    }
    default:
      return { type: 'file', path: '/home/user/out.csv', name: 'out.csv', size: r.int(5000) };
  }
}

/** A plausible history: turns of questions, attempts, results and
 * explanations, each cell finished (or not) in any way. */
function history(r: Rng): Body[] {
  const bodies: Body[] = [];
  let id = 0;
  const nextId = () => ++id;
  const finish = (cell: number) => {
    const status = r.pick(['ok', 'ok', 'error', 'cancelled']);
    const error =
      status === 'error'
        ? { code: r.pick(['interrupted', 'ungrounded', 'llm_unreachable']), message: r.pick(TEXTS) }
        : undefined;
    bodies.push({ kind: 'cell_finished', cell_id: cell, status, elapsed_ms: r.int(90_000), ...(error ? { error } : {}) });
  };
  const turns = 1 + r.int(4);
  const started: number[] = [];
  for (let t = 0; t < turns; t++) {
    const turn = nextId();
    const turnKind = r.pick(['ask', 'ask', 'run', 'rerun']);
    // Branches: another version of an earlier turn, or a switch back to one.
    if (started.length > 0 && r.chance(0.15)) bodies.push({ kind: 'branch_selected', turn: r.pick(started) });
    const alternative = started.length > 0 && r.chance(0.25) ? { alternative_to: r.pick(started) } : {};
    started.push(turn);
    bodies.push({ kind: 'turn_started', turn, turn_kind: turnKind, ...alternative });
    if (r.chance(0.1)) {
      const failed = r.chance(0.3);
      bodies.push({ kind: 'kernel_restored', programs: r.int(4), ...(failed ? { error: { code: 'restore_failed', message: 'Program 1 of 2 failed' } } : {}) });
    }
    if (turnKind === 'ask') bodies.push({ kind: 'user_message', cell_id: nextId(), text: r.pick(TEXTS) });
    let lastCode: number | undefined;
    const attempts = r.int(4);
    for (let attempt = 1; attempt <= attempts; attempt++) {
      const code = nextId();
      lastCode = code;
      bodies.push({ kind: 'cell_started', cell_id: code, cell_kind: 'code', language: r.pick(['python', 'javascript', 'bash']), attempt });
      for (const piece of r.pick(CODES).split(/(?<= )/)) {
        if (r.chance(0.9)) bodies.push({ kind: 'cell_delta', cell_id: code, text: piece });
      }
      if (r.chance(0.9)) finish(code);
      if (r.chance(0.8)) {
        const result = nextId();
        bodies.push({ kind: 'cell_started', cell_id: result, cell_kind: 'result', attempt, source: code });
        for (let o = r.int(4); o > 0; o--) bodies.push({ kind: 'cell_output', cell_id: result, output: output(r) });
        if (r.chance(0.85)) finish(result);
      }
    }
    for (let e = r.int(3); e > 0; e--) {
      const explanation = nextId();
      bodies.push({ kind: 'cell_started', cell_id: explanation, cell_kind: 'explanation' });
      for (const piece of r.pick(TEXTS).split(/(?<= )/)) bodies.push({ kind: 'cell_delta', cell_id: explanation, text: piece });
      if (r.chance(0.9)) finish(explanation);
    }
    if (r.chance(0.85)) {
      bodies.push({
        kind: 'turn_finished',
        turn,
        status: r.pick(['ok', 'error', 'cancelled']),
        elapsed_ms: r.int(100_000),
        ...(lastCode !== undefined && r.chance(0.8) ? { final_cell: lastCode } : {}),
      });
    }
    if (r.chance(0.15)) bodies.push({ kind: 'kernel_lost', reason: r.pick(['server_restart', 'fork', 'import']) });
  }
  return bodies;
}

/** `bodies` as the `…/events` download gives them. */
function asFile(bodies: Body[]): string {
  return bodies.map((event, i) => JSON.stringify({ type: 'event', seq: i + 1, ts_ms: 1_700_000_000_000 + i, event }) + '\n').join('');
}

test.describe('hydration', () => {
  test('random histories cut at random points render and come to life', async ({ page, browserName, pageErrors }, info) => {
    test.skip(info.project.name === 'no-js', 'hydration needs scripts');
    test.setTimeout(120_000);
    const seed = Number(process.env.RUNCELL_E2E_SEED ?? Math.floor(Math.random() * 2 ** 31));
    console.log(`hydration seed ${seed} (${browserName})`);
    const r = random(seed);
    for (let n = 0; n < 12; n++) {
      const whole = history(r);
      // Cut anywhere, the last event whole: the file as a dead server left it.
      const cut = whole.slice(0, 1 + r.int(whole.length));
      const created = await page.request.post('/api/sessions/import', { data: asFile(cut) });
      expect(created.status(), `history ${n} of seed ${seed}: ${await created.text()}`).toBe(201);
      const { url } = await created.json();
      await page.goto(url);
      await expect(page.locator('html'), `history ${n} of seed ${seed}`).toHaveAttribute('data-hydrated', 'true');
      await expect(page.locator('html')).not.toHaveAttribute('data-page-failed', 'true');
      // Alive: the message box takes text and Send is offered.
      await expect(page.getByRole('status', { name: 'Connection' })).toHaveText('connected');
      await page.getByRole('textbox', { name: 'Message' }).fill('still alive?');
      await expect(page.getByRole('button', { name: 'Send' })).toBeEnabled();
    }
    // An HTML output's frame runs no script, and Chromium says so: that
    // is the frame doing its job, not the page failing.
    pageErrors.splice(0, pageErrors.length, ...pageErrors.filter((e) => !e.includes("Blocked script execution in 'about:srcdoc'")));
  });

  test('a stop before the second attempt wrote code, then a reload, leaves a live page', async ({ page }, info) => {
    test.skip(info.project.name === 'no-js', 'hydration needs scripts');
    // The reported case: attempt 1 failed, Stop came while attempt 2's code
    // cell was still empty; the page was reloaded.
    const bodies: Body[] = [
      { kind: 'turn_started', turn: 1, turn_kind: 'ask' },
      { kind: 'user_message', cell_id: 2, text: 'read sales.csv' },
      { kind: 'cell_started', cell_id: 3, cell_kind: 'code', language: 'python', attempt: 1 },
      { kind: 'cell_delta', cell_id: 3, text: "open('sales.csv')" },
      { kind: 'cell_finished', cell_id: 3, status: 'ok', elapsed_ms: 5 },
      { kind: 'cell_started', cell_id: 4, cell_kind: 'result', attempt: 1, source: 3 },
      { kind: 'cell_output', cell_id: 4, output: { type: 'error', name: 'FileNotFoundError', value: 'sales.csv', traceback: [] } },
      { kind: 'cell_finished', cell_id: 4, status: 'error', elapsed_ms: 5 },
      { kind: 'cell_started', cell_id: 5, cell_kind: 'code', language: 'python', attempt: 2 },
      { kind: 'cell_finished', cell_id: 5, status: 'cancelled', elapsed_ms: 1 },
      { kind: 'turn_finished', turn: 1, status: 'cancelled', elapsed_ms: 9, final_cell: 5 },
    ];
    const created = await page.request.post('/api/sessions/import', { data: asFile(bodies) });
    expect(created.status()).toBe(201);
    const { url } = await created.json();
    for (let load = 0; load < 2; load++) {
      await page.goto(url);
      await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
      await expect(page.getByRole('status', { name: 'Connection' })).toHaveText('connected');
    }
    // The stopped attempt is said as stopped, the first as not fixed.
    await expect(page.getByText('attempt 1 failed: FileNotFoundError — attempt 2 followed').first()).toBeVisible();
  });
});

// Without the error fixture: this page's errors are the point.
plain('a page whose script fails says so and offers a reload', async ({ page }, info) => {
  plain.skip(info.project.name === 'no-js', 'the guard is a script');
  const created = await page.request.post('/api/sessions/import', {
    data: asFile([{ kind: 'turn_started', turn: 1, turn_kind: 'ask' }, { kind: 'user_message', cell_id: 2, text: 'hi' }]),
  });
  expect(created.status()).toBe(201);
  const { url } = await created.json();
  // The bundle cannot be had: the page must not look alive.
  await page.route('**/pkg/runcell_bg.wasm', (route) => route.abort());
  await page.goto(url);
  const note = page.getByRole('alert').filter({ hasText: 'This page stopped working' });
  await expect(note).toBeVisible();
  await expect(note.getByRole('button', { name: 'Reload' })).toBeVisible();
  await expect(page.getByRole('status', { name: 'Connection' })).toHaveText('page error');
  await expect(page.locator('html')).not.toHaveAttribute('data-hydrated', 'true');
  // Reload with the bundle back: alive again.
  await page.unroute('**/pkg/runcell_bg.wasm');
  await note.getByRole('button', { name: 'Reload' }).click();
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  await expect(page.getByRole('status', { name: 'Connection' })).toHaveText('connected');
});
