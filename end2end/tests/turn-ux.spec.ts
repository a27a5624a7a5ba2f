import { expect, test } from './fixtures';
import { problems } from './axe';
import { NotebookPage } from './pages/notebook';

/** A message whose fenced block the scripted model runs as written. */
const fenced = (code: string) => '```python\n' + code + '\n```';

test('an empty notebook offers no Download .ipynb; one with cells does', async ({ page, javaScriptEnabled }) => {
  const notebook = new NotebookPage(page);
  await notebook.openNew();
  const download = page.getByRole('link', { name: 'Download .ipynb' });
  await expect(notebook.conversation).toContainText('Ask something to start');
  await expect(download).toHaveCount(0);
  if (!javaScriptEnabled) return;
  await notebook.waitConnected();
  await notebook.ask(fenced("print('cells now')"));
  await expect(notebook.explanationCells).toHaveCount(1, { timeout: 25_000 });
  await expect(download).toBeVisible();
});

test('a program that needs a package: runcell says what it installed, pip\'s log folds, the re-run says why', async ({ page, javaScriptEnabled }) => {
  test.setTimeout(90_000);
  const notebook = new NotebookPage(page);
  await notebook.openNew();
  const question = fenced('import humanize\nprint(humanize.naturalsize(10**6))');
  if (javaScriptEnabled) {
    await notebook.waitConnected();
    await notebook.ask(question);
  } else {
    await notebook.message.fill(question);
    await notebook.send.click();
  }
  await expect(notebook.explanationCells.first()).toContainText('1.0 MB', { timeout: 60_000 });
  await expect(notebook.codeCells).toHaveCount(3);

  // The failed attempt folds like any other replaced attempt.
  const failed = notebook.codeCells.nth(0);
  await expect(failed.locator('details.fold > summary')).toHaveText(
    'attempt 1 failed: ModuleNotFoundError — re-run after installing humanize',
  );
  await expect(failed.locator('details.fold')).not.toHaveAttribute('open', /.*/);

  // The install: runcell's line on top, pip's log folded, no index address
  // and no advice to restart a kernel.
  const install = notebook.resultCells.nth(1);
  const summary = install.locator('.install-summary');
  await expect(summary).toHaveText(/^Installed humanize \d[\d.]* \([\d.]+ [KM]B, from runcell's package index(, cached)?\)/);
  const log = install.locator('details.pip-log');
  await expect(log.locator('summary')).toHaveText("pip's log");
  await expect(log).not.toHaveAttribute('open', /.*/);
  const logText = (await log.locator('pre').textContent()) ?? '';
  expect(logText).toContain('Successfully installed humanize');
  expect(logText).not.toMatch(/https?:\/\//);
  expect(logText).not.toContain('restart the kernel');
  await expect(install).not.toContainText('restart the kernel');

  // The program run again is runcell's re-run, not an edit.
  const rerun = notebook.codeCells.nth(2);
  await expect(rerun.locator('.cell-badges')).toHaveText('python · re-run after installing humanize');
  await expect(rerun.locator('.cell-badges')).not.toContainText('edited');
  await expect(notebook.resultCells.nth(2)).toContainText('1.0 MB');
  // Without scripts the page reloads itself until the turn is over.
  if (javaScriptEnabled) expect(await problems(page)).toEqual([]);
});

test.describe('keyboard and banners on a live page', () => {
  test.skip(({ javaScriptEnabled }) => !javaScriptEnabled, 'focus and banners follow the live page');

  test('Enter on the home page opens the session with the keyboard in the message box', async ({ page }) => {
    await page.goto('/');
    const home = page.getByRole('textbox', { name: 'Message' });
    await home.fill(fenced("print('from home')"));
    await home.press('Enter');
    await expect(page).toHaveURL(/\/sessions\/[0-9a-f-]{36}$/);
    const notebook = new NotebookPage(page);
    await notebook.waitConnected();
    await expect(notebook.message).toBeFocused();
    await expect(notebook.resultCells.first()).toContainText('from home', { timeout: 25_000 });
    await notebook.waitTurnEnd();
    await expect(notebook.message).toBeFocused();
  });

  test('while a turn runs, Stop is one Tab from the message box, and Escape there stops', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.ask(fenced("import time\nprint('sleeping', flush=True)\ntime.sleep(20)\nprint('woke')"));
    await expect(notebook.resultCells.first()).toContainText('sleeping', { timeout: 25_000 });
    await expect(notebook.message).toBeFocused();
    await page.keyboard.press('Tab');
    await expect(notebook.stop).toBeFocused();
    await expect(notebook.stop).toHaveAttribute('aria-keyshortcuts', 'Escape');
    await page.keyboard.press('Shift+Tab');
    await expect(notebook.message).toBeFocused();
    await page.keyboard.press('Escape');
    await notebook.waitTurnEnd();
    await expect(notebook.resultCells.first()).not.toContainText('woke');
  });

  test('Escape in the question editor gives the focus back to Edit', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.ask(fenced("print('asked')"));
    await expect(notebook.explanationCells).toHaveCount(1, { timeout: 25_000 });
    await notebook.waitTurnEnd();
    const edit = notebook.userCells.first().getByRole('button', { name: 'Edit', exact: true });
    await edit.click();
    const editor = page.getByRole('textbox', { name: 'Edit the question' });
    await expect(editor).toBeFocused();
    await editor.press('Escape');
    await expect(editor).toHaveCount(0);
    await expect(edit).toBeFocused();
  });

  test('an edited first question renames the open page, and an older version renames nothing', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.ask(fenced("print('first try')"));
    await notebook.waitTurnEnd();
    const heading = page.getByRole('heading', { level: 1 });
    await expect(heading).toHaveText("print('first try')");
    await notebook.userCells.first().getByRole('button', { name: 'Edit', exact: true }).click();
    const editor = page.getByRole('textbox', { name: 'Edit the question' });
    await editor.fill(fenced("print('second try')"));
    await editor.press('Enter');
    await notebook.waitTurnEnd();
    await expect(heading).toHaveText("print('second try')");
    await expect(page).toHaveTitle("print('second try') · runcell");
    const versions = page.getByRole('navigation', { name: 'Versions of this question' });
    await versions.getByRole('button', { name: 'Previous version' }).click();
    await expect(versions).toContainText('1 / 2');
    await expect(heading).toHaveText("print('second try')");
    await page.reload();
    await expect(heading).toHaveText("print('second try')");
  });

  test('"Jump to latest" counts only cells that arrived: none after a version switch', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.ask(fenced("for i in range(120):\n    print('line', i)"));
    await expect(notebook.explanationCells).toHaveCount(1, { timeout: 25_000 });
    await notebook.waitTurnEnd();
    const jump = page.getByRole('button', { name: /Jump to latest/ });
    await expect(jump).toBeHidden();
    // Regenerate, then back to the first version while scrolled up: the
    // cells on show change, none is new.
    await notebook.userCells.first().getByRole('button', { name: 'Regenerate' }).click();
    const versions = page.getByRole('navigation', { name: 'Versions of this question' });
    await expect(versions).toContainText('2 / 2', { timeout: 25_000 });
    await notebook.waitTurnEnd();
    await page.mouse.wheel(0, -3000);
    await page.getByRole('button', { name: 'Previous version' }).click();
    await expect(versions).toContainText('1 / 2');
    await page.waitForTimeout(300);
    await expect(jump).toHaveText('↓ Jump to latest');
    // In the composer's band: it covers no cell.
    if (await jump.isVisible()) {
      const pill = await jump.boundingBox();
      const message = await notebook.message.boundingBox();
      expect(pill && message && pill.y + pill.height <= message.y).toBe(true);
      const composer = await page.getByRole('form', { name: 'Ask' }).boundingBox();
      expect(pill && composer && pill.y >= composer.y).toBe(true);
    }
  });

  test('the notice that nothing ran here goes once code ran (Edit & run)', async ({ page }) => {
    const notebook = {
      cells: [{ cell_type: 'code', metadata: {}, source: ['x = 41'], outputs: [], execution_count: null }],
      metadata: {},
      nbformat: 4,
      nbformat_minor: 5,
    };
    const imported = await page.request.post('/api/sessions/import', { data: JSON.stringify(notebook) });
    expect(imported.status()).toBe(201);
    const id = (await imported.json()).id;
    await page.goto(`/sessions/${id}`);
    const cells = new NotebookPage(page);
    await cells.waitConnected();
    const notice = page.getByText('These cells come from an imported notebook');
    await expect(notice).toBeVisible();
    expect(await problems(page)).toEqual([]);
    await cells.codeCells.first().getByRole('button', { name: 'Edit & run' }).click();
    const editor = page.getByRole('textbox', { name: 'Edit code' });
    await editor.fill("print('ran here')");
    await editor.press('Control+Enter');
    await expect(cells.resultCells.last()).toContainText('ran here', { timeout: 25_000 });
    await expect(notice).toBeHidden();
    await page.reload();
    await expect(cells.resultCells.last()).toContainText('ran here');
    await expect(notice).toHaveCount(0);
  });
});
