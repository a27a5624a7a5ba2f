import { test, expect } from './fixtures';
import { NotebookPage } from './pages/notebook';

const fenced = (code: string) => '```python\n' + code + '\n```';

test('a renamed session\'s share link and fork carry its name', async ({ page, browser }) => {
  const notebook = new NotebookPage(page);
  const url = await notebook.openNew();
  const id = url.split('/').pop() ?? '';
  const asked = await page.request.post(`/api/sessions/${id}/ask`, { data: { text: fenced("print('named')") } });
  expect(await asked.text()).toContain('turn_finished');
  const { path } = await (await page.request.post(`/api/sessions/${id}/share`)).json();
  const renamed = await page.request.patch(`/api/sessions/${id}`, { data: { title: 'Quarterly numbers' } });
  expect(renamed.status()).toBe(200);

  const stranger = await browser.newContext();
  const reader = await stranger.newPage();
  await reader.goto(path);
  await expect(reader.getByRole('heading', { level: 1 })).toHaveText('Quarterly numbers');
  await expect(reader).toHaveTitle('Quarterly numbers · shared · runcell');
  await reader.getByRole('button', { name: 'Fork' }).click();
  await expect(reader).toHaveURL(/\/sessions\/[0-9a-f-]{36}$/);
  // A fork is told apart from what it copies (issue 41).
  await expect(reader.getByRole('heading', { level: 1 })).toHaveText('Quarterly numbers (copy)');
  // The fork is in its owner's list, by that name.
  const fork = reader.url().split('/').pop() ?? '';
  await expect(
    reader.getByRole('navigation', { name: 'Sessions' }).locator(`a[href="/sessions/${fork}"]`),
  ).toHaveText('Quarterly numbers (copy)');
  await stranger.close();
});

test.describe('without a reload', () => {
  test.skip(({ javaScriptEnabled }) => !javaScriptEnabled, 'needs the hydrated page');

  test('the first question puts the session in the sidebar, and a rename shows everywhere', async ({ page }) => {
    const notebook = new NotebookPage(page);
    const url = await notebook.openNew();
    const id = url.split('/').pop() ?? '';
    await notebook.waitConnected();
    // A page that reloads loses this.
    await page.evaluate(() => ((window as unknown as { stayed: boolean }).stayed = true));
    const sidebar = page.locator('details.sidebar');
    // The sessions list's entry (the list of kernels in use may name it too).
    const entry = sidebar
      .getByRole('navigation', { name: 'Sessions' })
      .getByRole('listitem')
      .filter({ has: page.locator(`a[href="/sessions/${id}"]`) });
    await expect(entry).toHaveCount(0);
    const count = sidebar.locator('summary .count');
    const before = Number((await count.textContent())?.replace(/\D/g, ''));
    await notebook.ask(fenced("print('listed at once')"));
    await expect(entry.getByRole('link')).toHaveText("print('listed at once')");
    await expect(entry.getByRole('link')).toHaveAttribute('aria-current', 'page');
    await expect(count).toHaveText(`(${before + 1})`);
    await notebook.waitTurnEnd();

    await entry.locator('summary').first().click();
    await entry.getByRole('textbox', { name: 'New title' }).fill('Listed, renamed');
    await entry.getByRole('button', { name: 'Rename' }).click();
    await expect(entry.getByRole('link')).toHaveText('Listed, renamed');
    await expect(page.getByRole('heading', { level: 1 })).toHaveText('Listed, renamed');
    await expect(page).toHaveTitle('Listed, renamed · runcell');
    // The menu closed, and the keyboard is on the renamed entry.
    await expect(entry.locator('details.entry-actions')).not.toHaveAttribute('open', '');
    await expect(entry.getByRole('link')).toBeFocused();
    expect(await page.evaluate(() => (window as unknown as { stayed?: boolean }).stayed)).toBe(true);
    // The server kept it.
    const listed = await (await page.request.get('/api/sessions')).json();
    expect(listed.sessions.find((s: { id: string }) => s.id === id).title).toBe('Listed, renamed');
  });

  test('a message sent during a turn shows as queued, can be taken back, and leaves when the turn ends', async ({
    page,
  }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    // Long enough that a loaded machine's page still finds it running when
    // the second message is typed (two seconds were not, once in CI).
    await notebook.ask(fenced("import time\ntime.sleep(8)\nprint('first done')"));
    await expect(notebook.stop).toBeVisible();
    const queue = page.getByRole('list', { name: 'Queued messages' });

    await notebook.ask('a second thought');
    await expect(queue.getByRole('listitem')).toHaveText(/Queued, sent when this turn ends:\s*a second thought/);
    await expect(notebook.message).toHaveValue('');
    await queue.getByRole('button', { name: 'Cancel queued message: a second thought' }).click();
    await expect(queue).toHaveCount(0);
    // Taken back into the box, not lost.
    await expect(notebook.message).toHaveValue('a second thought');
    await expect(notebook.message).toBeFocused();

    await notebook.message.fill(fenced("print('second done')"));
    await notebook.message.press('Enter');
    await expect(queue.getByRole('listitem')).toHaveCount(1);
    await expect(notebook.userCells).toHaveCount(1);
    // The first turn ends; the queued one leaves by itself.
    await expect(notebook.userCells).toHaveCount(2, { timeout: 25_000 });
    await expect(queue).toHaveCount(0);
    await expect(notebook.resultCells.last().locator('.out-stdout')).toHaveText('second done\n', {
      timeout: 25_000,
    });
  });

  test('text typed before the page is hydrated is kept', async ({ page }) => {
    // The bundle is held back until the person has typed.
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    await page.route('**/pkg/*.wasm', async (route) => {
      await held;
      await route.continue();
    });
    const notebook = new NotebookPage(page);
    const made = await page.request.post('/api/sessions');
    await page.goto((await made.json()).url, { waitUntil: 'domcontentloaded' });
    await notebook.message.pressSequentially('typed early');
    release();
    await notebook.waitConnected();
    await expect(notebook.message).toHaveValue('typed early');
    await notebook.message.press('Enter');
    await expect(notebook.userCells.first().locator('.cell-body')).toHaveText('typed early');
  });

  test('switching the sandbox says what changes and drops what no longer holds', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    const picker = page.getByRole('combobox', { name: 'Sandbox' });
    const python = page.getByRole('status', { name: 'Python in this page' });
    const note = page.locator('#backend-note');
    await expect(note).toBeHidden();
    await picker.selectOption({ label: 'Browser (Pyodide)' });
    await expect(note).toHaveText(/code runs in this page's own Python \(Pyodide\), in a fresh kernel.*no files/);
    await expect(python).toBeVisible();
    const files = page.getByRole('region', { name: 'Files' });
    await expect(files.getByText("The page's own Python has no files")).toBeVisible();
    await expect(files.getByText('No files yet')).toBeHidden();

    await picker.selectOption({ label: 'Local sandbox' });
    await expect(note).toHaveText(/code runs in this server's local sandbox, in a fresh kernel/);
    // The page's Python says nothing while it is not where code runs.
    await expect(python).toBeHidden();
    await expect(files.getByText("The page's own Python has no files")).toBeHidden();
    await expect(files.getByText('No files yet')).toBeVisible();
    await expect(picker).toHaveAttribute('aria-describedby', 'backend-note');

    // "From the next question" holds until that question begins: then the
    // note, and its Dismiss, go by themselves.
    await notebook.ask(fenced("print('ran where the note said')"));
    await expect(notebook.resultCells.last().locator('.out-stdout')).toHaveText('ran where the note said\n', {
      timeout: 25_000,
    });
    await expect(note).toBeHidden();
    await expect(page.getByRole('button', { name: 'Dismiss the note' })).toBeHidden();
  });
});
