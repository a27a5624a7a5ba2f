import type { APIRequestContext, Page } from '@playwright/test';
import { test, expect } from './fixtures';
import { NotebookPage } from './pages/notebook';

const fenced = (code: string) => '```python\n' + code + '\n```';

/** Opens a new session and gives it a finished turn through the API (with
 * the page's own cookie), so that it works with JavaScript off too. */
async function sessionWith(page: Page, request: APIRequestContext, code: string): Promise<string> {
  const notebook = new NotebookPage(page);
  const url = await notebook.openNew();
  const id = url.split('/').pop() ?? '';
  const response = await request.post(`/api/sessions/${id}/ask`, { data: { text: fenced(code) } });
  expect(response.status()).toBe(200);
  expect(await response.text()).toContain('turn_finished');
  await page.reload();
  return id;
}

/** Drops the browser's own reports of the 404 documents a test expects. */
function expect404s(pageErrors: string[], count: number) {
  const expected = pageErrors.filter((e) => e.includes('status of 404 (Not Found)'));
  expect(expected).toHaveLength(count);
  pageErrors.splice(0, pageErrors.length, ...pageErrors.filter((e) => !expected.includes(e)));
}

test('the sidebar lists, renames and deletes sessions (with confirmation)', async ({ page, pageErrors }) => {
  const id = await sessionWith(page, page.request, "print('renamable session')");
  const sidebar = page.getByRole('navigation', { name: 'Sessions' });
  const entry = sidebar.getByRole('listitem').filter({ has: page.locator(`a[href="/sessions/${id}"]`) });
  await expect(entry.getByRole('link')).toHaveText(/renamable session/);
  await expect(entry.getByRole('link')).toHaveAttribute('aria-current', 'page');

  await entry.locator('summary').first().click();
  await entry.getByRole('textbox', { name: 'New title' }).fill('Primes, renamed');
  await entry.getByRole('button', { name: 'Rename' }).click();
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('Primes, renamed');
  await expect(entry.getByRole('link')).toHaveText('Primes, renamed');

  await entry.locator('summary').first().click();
  await entry.getByText('Delete…').click();
  await expect(entry.getByText('Delete “Primes, renamed” with all its cells and outputs?')).toBeVisible();
  await entry.getByRole('button', { name: 'Delete permanently' }).click();
  // Back to the home page, which makes no session until one is asked for.
  await expect(page).toHaveURL(/\/$/);
  await expect(page.getByRole('textbox', { name: 'Message' })).toBeVisible();
  await expect(page.locator(`a[href="/sessions/${id}"]`)).toHaveCount(0);
  const gone = await page.goto(`/sessions/${id}`);
  expect(gone?.status()).toBe(404);
  expect404s(pageErrors, 1);
});

test('a revoked link is a 404 for everyone', async ({ page, browser, pageErrors }) => {
  const id = await sessionWith(page, page.request, "print('soon private again')");
  const shared = await page.request.post(`/api/sessions/${id}/share`);
  const { path } = await shared.json();
  const stranger = await browser.newContext();
  const strangerPage = await stranger.newPage();
  expect((await strangerPage.goto(path))?.status()).toBe(200);
  await expect(strangerPage.getByText('soon private again').first()).toBeVisible();
  expect((await page.request.delete(`/api/sessions/${id}/share`)).status()).toBe(204);
  expect((await strangerPage.goto(path))?.status()).toBe(404);
  await expect(strangerPage.getByRole('heading', { name: 'This link does not work' })).toBeVisible();
  await stranger.close();
  expect404s(pageErrors, 0);
});

test.describe('with JavaScript', () => {
  test.skip(({ javaScriptEnabled }) => !javaScriptEnabled, 'needs the hydrated page');

  test('share → a fresh browser reads it → Fork → an editable session that re-runs', async ({ page, browser }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.ask(fenced("base = 41\nprint('shared answer', base + 1)"));
    await expect(notebook.explanationCells).toHaveCount(1);
    await notebook.waitTurnEnd();
    // Named by its first question at once, before any reload.
    await expect(page.getByRole('heading', { level: 1 })).toHaveText("base = 41");
    const before = page.url();
    await page.getByRole('button', { name: 'Share' }).click();
    const link = page.locator('a.share-link');
    await expect(link).toHaveAttribute('href', /^\/s\/[A-Za-z0-9_-]{43}$/);
    // In place: no reload, and the new link has the keyboard.
    await expect(link).toBeFocused();
    expect(page.url()).toBe(before);
    const path = (await link.getAttribute('href')) ?? '';
    await expect(page.getByRole('button', { name: 'Stop sharing' })).toBeVisible();

    // Someone else: a fresh context, no cookies.
    const stranger = await browser.newContext();
    const other = await stranger.newPage();
    const errors: string[] = [];
    other.on('pageerror', (e) => errors.push(e.message));
    const response = await other.goto(path);
    expect(response?.status()).toBe(200);
    const shared = new NotebookPage(other);
    await expect(shared.resultCells.first()).toContainText('shared answer 42');
    await expect(shared.message).toHaveCount(0);
    await expect(other.getByRole('button', { name: 'Edit & run' })).toBeHidden();
    await expect(other.getByRole('button', { name: 'Stop sharing' })).toHaveCount(0);
    await expect(other.getByRole('navigation', { name: 'Sessions' })).toHaveCount(0);

    await other.getByRole('button', { name: 'Fork' }).click();
    await expect(other).toHaveURL(/\/sessions\/[0-9a-f-]{36}$/);
    expect(other.url()).not.toBe(page.url());
    await shared.waitConnected();
    await expect(shared.resultCells.first()).toContainText('shared answer 42');
    await expect(other.getByText('This is a fork')).toBeVisible();
    await other.getByRole('button', { name: 'Re-run all' }).click();
    await expect(other.getByText('This is a fork')).toBeHidden({ timeout: 25_000 });
    await shared.ask(fenced('print(base * 2)'));
    await expect(shared.resultCells.last()).toContainText('82', { timeout: 25_000 });
    expect(errors).toEqual([]);
    await stranger.close();

    // The owner's session is untouched by the fork.
    await page.reload();
    await expect(notebook.resultCells).toHaveCount(1);
  });

  test('a fork of a link shared without its files says its code may need them', async ({ page, browser }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.ask(fenced("open('rows.csv', 'w').write('a\\n1\\n2\\n')\nprint('rows', len(open('rows.csv').readlines()) - 1)"));
    await expect(notebook.resultCells.first()).toContainText('rows 2');
    await notebook.waitTurnEnd();
    await page.getByRole('button', { name: 'Share' }).click();
    const link = page.locator('a.share-link');
    await expect(link).toHaveAttribute('href', /^\/s\//);
    const path = (await link.getAttribute('href')) ?? '';

    const stranger = await browser.newContext();
    const other = await stranger.newPage();
    await other.goto(path);
    await other.getByRole('button', { name: 'Fork' }).click();
    await expect(other).toHaveURL(/\/sessions\/[0-9a-f-]{36}$/);
    await expect(other.getByText('This is a fork of a link shared without its files')).toBeVisible();
    await expect(other.getByText('Upload them (Files) first.')).toBeVisible();
    await stranger.close();
  });

  test('another session reached within the page (a history entry of its own) loads as its own page', async ({ page }) => {
    // The browser reads a session's data from its page only: the router
    // moving to another session in the same document loads that session.
    const first = await sessionWith(page, page.request, "print('the first notebook')");
    await sessionWith(page, page.request, "print('the second notebook')");
    const notebook = new NotebookPage(page);
    await expect(notebook.resultCells.first()).toContainText('the second notebook');
    await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
    const loaded = page.waitForEvent('load');
    await page.evaluate((id) => {
      history.pushState(null, '', `/sessions/${id}`);
      dispatchEvent(new PopStateEvent('popstate', { state: null }));
    }, first);
    await loaded;
    await expect(page).toHaveURL(new RegExp(`/sessions/${first}$`));
    await expect(notebook.resultCells.first()).toContainText('the first notebook');
    await expect(page.getByRole('heading', { level: 1 })).toHaveText("print('the first notebook')");
    await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  });
});

test.describe('notebooks in and out', () => {
  test.skip(({ javaScriptEnabled }) => !javaScriptEnabled, 'needs the hydrated page');

  test('Download .ipynb gives the session as a notebook; Import .ipynb brings one in and Re-run all runs it', async ({ page, pageErrors }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.ask(fenced("half = 21\nprint('exported', half * 2)"));
    // Stop may not be showing yet when the ask is sent: once the turn's last
    // cell is there, Stop hiding means the turn has ended (the export holds
    // only finished turns).
    await expect(notebook.explanationCells).toHaveCount(1, { timeout: 25_000 });
    await notebook.waitTurnEnd();
    const downloading = page.waitForEvent('download');
    await page.getByRole('link', { name: 'Download .ipynb' }).click();
    const download = await downloading;
    expect(download.suggestedFilename()).toMatch(/\.ipynb$/);
    const saved = await download.path();
    const fs = await import('node:fs');
    const exported = JSON.parse(fs.readFileSync(saved, 'utf8'));
    expect(exported.nbformat).toBe(4);
    const code = exported.cells.find((c: { cell_type: string }) => c.cell_type === 'code');
    expect(code.source).toContain('half = 21');
    expect(code.outputs[0].text).toBe('exported 42\n');

    // The same file back in, through the top bar's button: a new session.
    const before = page.url();
    await page.getByLabel('Import a Jupyter notebook').setInputFiles({
      name: download.suggestedFilename(), mimeType: 'application/x-ipynb+json', buffer: fs.readFileSync(saved),
    });
    await expect(page).not.toHaveURL(before);
    await expect(page).toHaveURL(/\/sessions\/[0-9a-f-]{36}$/);
    const imported = new NotebookPage(page);
    await imported.waitConnected();
    await expect(imported.resultCells.first()).toContainText('exported 42');
    await expect(page.getByText('These cells come from an imported notebook')).toBeVisible();
    await page.getByRole('button', { name: 'Re-run all' }).click();
    await expect(page.getByText('These cells come from an imported notebook')).toBeHidden({ timeout: 25_000 });
    await imported.ask(fenced('print(half + 1)'));
    await expect(imported.resultCells.last()).toContainText('22', { timeout: 25_000 });

    // Not a notebook: said so, and the page stays.
    const here = page.url();
    await page.getByLabel('Import a Jupyter notebook').setInputFiles({
      name: 'broken.ipynb', mimeType: 'application/x-ipynb+json', buffer: Buffer.from('{not json'),
    });
    await expect(page.getByRole('status').filter({ hasText: 'broken.ipynb was not imported' })).toContainText('not JSON');
    expect(page.url()).toBe(here);
    // The browser's own report of that refusal is expected.
    const refusal = pageErrors.filter((e) => e.includes('status of 400 (Bad Request)'));
    expect(refusal).toHaveLength(1);
    pageErrors.splice(0, pageErrors.length, ...pageErrors.filter((e) => !refusal.includes(e)));
  });
});

test('"Use in a terminal" gives the command that makes a terminal this browser', async ({ page, context }) => {
  const notebook = new NotebookPage(page);
  await notebook.openNew();
  const [offer] = await Promise.all([
    context.waitForEvent('page'),
    page.getByRole('button', { name: 'Use in a terminal' }).click(),
  ]);
  await offer.waitForLoadState();
  await expect(offer.getByRole('heading', { level: 1 })).toHaveText('Use these sessions in a terminal');
  await expect(offer.locator('pre')).toHaveText(/^runcell chat --url http:\/\/[^ ]+ --join [0-9a-f]{32}$/);
  await offer.close();
});
