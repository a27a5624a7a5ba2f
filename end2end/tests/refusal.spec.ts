import type { APIResponse, Page } from '@playwright/test';
import { test, expect } from './fixtures';
import { problems } from './axe';
import { NotebookPage } from './pages/notebook';

// A person whose notebooks hold every kernel they may (the e2e server
// listens on loopback, so only `max_kernels_per_owner`, 4, holds them), all
// of them running, runs code in a fifth notebook. The page does not show a
// failed cell: it says all kernels are in use, keeps the code, and, once
// one of the person's kernels is idle, offers to close it and run again.

const CAP = 4;

interface Filled {
  ids: string[];
  runs: Promise<APIResponse>[];
}

/** Opens a notebook and `CAP` more sessions of the same person, each
 * running a program that sleeps; waits until all `CAP` kernels run. */
async function fillKernels(page: Page): Promise<Filled> {
  const notebook = new NotebookPage(page);
  await notebook.openNew();
  const ids: string[] = [];
  const runs: Promise<APIResponse>[] = [];
  for (let n = 0; n < CAP; n++) {
    const made = await page.request.post('/api/sessions');
    expect(made.status()).toBe(201);
    const id = (await made.json()).id as string;
    ids.push(id);
    runs.push(
      page.request.post(`/api/sessions/${id}/run`, {
        data: { code: `import time\nprint('sleeper ${n}', flush=True)\ntime.sleep(110)`, language: 'python' },
        timeout: 150_000,
      }),
    );
  }
  await expect
    .poll(
      async () => {
        const listed = await (await page.request.get('/api/kernels')).json();
        return (listed.kernels as { running: boolean }[]).filter((k) => k.running).length;
      },
      { timeout: 60_000, intervals: [250, 500, 1000] },
    )
    .toBe(CAP);
  return { ids, runs };
}

/** Stops every sleeper and waits for their runs to end. */
async function wake(page: Page, filled: Filled) {
  for (const id of filled.ids) await page.request.post(`/api/sessions/${id}/stop`);
  await Promise.all(filled.runs);
}

/** A fifth notebook whose run was refused; its id. */
async function refusedNotebook(page: Page): Promise<string> {
  const made = await page.request.post('/api/sessions');
  expect(made.status()).toBe(201);
  const id = (await made.json()).id as string;
  const ran = await page.request.post(`/api/sessions/${id}/run`, {
    data: { code: 'print(6 * 7)', language: 'python' },
  });
  expect(ran.status()).toBe(200);
  const events = (await ran.text())
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line).event);
  expect(events.at(-2)).toEqual({ kind: 'kernel_refused', cell_id: expect.any(Number), cap: 'owner', held: CAP });
  expect(events.some((e) => e.kind === 'cell_started' && e.cell_kind === 'result')).toBe(false);
  return id;
}

const notice = (page: Page) => page.getByRole('alert').filter({ hasText: 'all kernels are in use' });
const closeAndRun = (page: Page) => page.getByRole('button', { name: 'Close the longest-idle kernel and run again' });

async function refusedThenRunAgain(page: Page, javaScriptEnabled: boolean | undefined, width: number) {
  const filled = await fillKernels(page);
  try {
    const id = await refusedNotebook(page);
    const notebook = new NotebookPage(page);
    await page.goto(`/sessions/${id}`);
    if (javaScriptEnabled) await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');

    // What happened, in the page: no failed cell, the code kept.
    await expect(notice(page)).toContainText(
      `Not run: all kernels are in use (your notebooks hold all ${CAP} kernels they may, and each is running a program).`,
    );
    await expect(notebook.codeCells).toHaveCount(1);
    await expect(notebook.codeCells.first()).toContainText('print(6 * 7)');
    await expect(notebook.resultCells).toHaveCount(0);
    await expect(page.getByText('SandboxError')).toHaveCount(0);
    await expect(notice(page).getByRole('link', { name: 'See Kernels in use' })).toBeVisible();
    // All running: nothing to close yet.
    await expect(notice(page)).toContainText('Stop a program that runs, or wait for one to end');
    await expect(closeAndRun(page)).toHaveCount(0);
    const box = await notice(page).boundingBox();
    expect((box?.x ?? 0) + (box?.width ?? 0)).toBeLessThanOrEqual(width);
    // axe runs on timers, which a page without scripts never fires.
    if (!javaScriptEnabled) return;
    expect(await problems(page)).toEqual([]);

    // The link opens the sessions list at its kernels.
    await notice(page).getByRole('link', { name: 'See Kernels in use' }).click();
    await expect(page.getByRole('heading', { name: /^Kernels in use/ })).toBeFocused();
    // Escape closes the list again (a drawer over the notice on a phone).
    await page.keyboard.press('Escape');

    // One sleeper stops: its kernel is idle, and the notice offers it.
    expect((await page.request.post(`/api/sessions/${filled.ids[0]}/stop`)).status()).toBe(204);
    await filled.runs[0];
    await expect(notice(page)).toContainText('Your longest-idle kernel is', { timeout: 15_000 });
    const button = closeAndRun(page);
    await expect(button).toBeVisible();
    await button.scrollIntoViewIfNeeded();
    const size = await button.boundingBox();
    expect(size?.height ?? 0).toBeGreaterThanOrEqual(44);
    expect((size?.x ?? 0) + (size?.width ?? 0)).toBeLessThanOrEqual(width);
    expect(await problems(page)).toEqual([]);

    await button.click();
    await expect(notebook.resultCells.last()).toContainText('42', { timeout: 30_000 });
    await expect(notice(page)).toHaveCount(0);
    const listed = await (await page.request.get('/api/kernels')).json();
    const sessions = (listed.kernels as { session_id: string }[]).map((k) => k.session_id);
    expect(sessions).not.toContain(filled.ids[0]);
    expect(sessions).toContain(id);
  } finally {
    await wake(page, filled);
  }
}

test('a run with every kernel running is a notice with what to do, not a failed cell', async ({ page, javaScriptEnabled }) => {
  test.setTimeout(180_000);
  await refusedThenRunAgain(page, javaScriptEnabled, 1280);
});

test('on a phone the refusal notice fits and its button is large enough to touch', async ({ page, javaScriptEnabled }) => {
  test.setTimeout(180_000);
  await page.setViewportSize({ width: 390, height: 844 });
  await refusedThenRunAgain(page, javaScriptEnabled, 390);
});

test('the refusal notice can be dismissed', async ({ page, javaScriptEnabled }) => {
  test.skip(!javaScriptEnabled, 'Dismiss is a button of the live page');
  test.setTimeout(180_000);
  const filled = await fillKernels(page);
  try {
    const id = await refusedNotebook(page);
    await page.goto(`/sessions/${id}`);
    await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
    await expect(notice(page)).toBeVisible();
    await notice(page).getByRole('button', { name: 'Dismiss this notice' }).click();
    await expect(notice(page)).toHaveCount(0);
    // The code stays, to run again by hand.
    await expect(new NotebookPage(page).codeCells).toHaveCount(1);
  } finally {
    await wake(page, filled);
  }
});

test('a refused question is asked again as a new version, and this time explained', async ({ page, javaScriptEnabled }) => {
  test.skip(!javaScriptEnabled, 'asking again is a button of the live page');
  test.setTimeout(180_000);
  const filled = await fillKernels(page);
  try {
    const made = await page.request.post('/api/sessions');
    expect(made.status()).toBe(201);
    const id = (await made.json()).id as string;
    // The scripted model writes the program its question holds.
    const asked = await page.request.post(`/api/sessions/${id}/ask`, { data: { text: '```python\nprint(6 * 7)\n```' } });
    expect(asked.status()).toBe(200);
    const notebook = new NotebookPage(page);
    await page.goto(`/sessions/${id}`);
    await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
    await expect(notice(page)).toContainText('Your question is kept above, to ask again.');
    await expect(notice(page)).toContainText('Stop a program that runs, or wait for one to end, then ask again.');
    await expect(notebook.explanationCells).toHaveCount(0);

    expect((await page.request.post(`/api/sessions/${filled.ids[0]}/stop`)).status()).toBe(204);
    await filled.runs[0];
    const button = page.getByRole('button', { name: 'Close the longest-idle kernel and ask again' });
    await expect(button).toBeVisible({ timeout: 15_000 });
    await button.click();
    // A second version of the question: its program ran and is explained;
    // the refused one stays reachable as the first.
    await expect(notebook.resultCells.last()).toContainText('42', { timeout: 30_000 });
    await expect(notebook.explanationCells).toHaveCount(1, { timeout: 30_000 });
    await expect(notice(page)).toHaveCount(0);
    const versions = notebook.userCells.first().getByRole('navigation', { name: 'Versions of this question' });
    await expect(versions).toContainText('2 / 2');
  } finally {
    await wake(page, filled);
  }
});
