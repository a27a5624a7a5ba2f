import { expect, test } from './fixtures';
import { NotebookPage } from './pages/notebook';

/** The program the scripted model writes for a message without code. */
const printed = (text: string) => 'print(' + JSON.stringify(text) + ')';
/** A message whose fenced block the scripted model runs as written. */
const fenced = (code: string, mode?: string) => (mode ? `#scripted: ${mode}\n` : '') + '```python\n' + code + '\n```';

test('the notebook shell renders', async ({ page, javaScriptEnabled }) => {
  const notebook = new NotebookPage(page);
  await notebook.openNew();
  await expect(page).toHaveTitle('New session · runcell');
  await expect(page.getByRole('link', { name: 'runcell' })).toBeVisible();
  await expect(page.getByRole('button', { name: 'New session' })).toBeVisible();
  await expect(page.getByText('Ask something to start')).toBeVisible();
  await expect(notebook.message).toBeVisible();
  await expect(notebook.send).toBeVisible();
  const notice = page.getByText('JavaScript is off: answers appear when the page reloads');
  if (javaScriptEnabled) {
    await notebook.waitConnected();
    await expect(notebook.send).toBeEnabled();
    await expect(notice).toBeHidden();
    await expect(notebook.stop).toBeHidden();
  } else {
    // No link to show without scripts, and the composer posts the form
    // (issue 41: it was typeable, with Send disabled and "offline").
    await expect(notebook.connection).toBeHidden();
    await expect(notebook.send).toBeEnabled();
    await expect(notice).toBeVisible();
    await expect(notebook.stop).toBeHidden();
    await notebook.message.fill(fenced('print(6 * 7)'));
    await notebook.send.click();
    await expect(notebook.userCells).toHaveCount(1);
    // The page reloads itself until the answer is in.
    await expect(notebook.explanationCells.first()).toContainText('42', { timeout: 25_000 });
  }
});

test('a session with history renders in full', async ({ page, browser }) => {
  // Fill a session from a hydrated page, then open it in the project's page.
  const writer = await browser.newContext({ javaScriptEnabled: true });
  const writerPage = new NotebookPage(await writer.newPage());
  const url = await writerPage.openNew();
  await writerPage.waitConnected();
  await writerPage.ask(fenced('import math\nprint("pi is", round(math.pi, 4))'));
  await expect(writerPage.explanationCells).toHaveCount(1);
  await writerPage.waitTurnEnd();
  await writerPage.ask('second <b>question</b>');
  await expect(writerPage.explanationCells).toHaveCount(2);
  await writerPage.waitTurnEnd();
  // Sessions are private to their owner: the project's page is the same
  // owner (the same cookie), in a context of its own.
  await page.context().addCookies(await writer.cookies());
  await writer.close();

  const notebook = new NotebookPage(page);
  await page.goto(url);
  expect(await notebook.kinds()).toEqual([
    'You', 'Code', 'Result', 'Explanation',
    'You', 'Code', 'Result', 'Explanation',
  ]);
  const code = notebook.codeCells.first();
  await expect(code.locator('pre.code')).toHaveText('import math\nprint("pi is", round(math.pi, 4))');
  // Highlighted on the server: keywords and strings have their classes.
  await expect(code.locator('pre.code .hl-keyword').first()).toHaveText('import');
  await expect(code.locator('pre.code .hl-string').first()).toBeVisible();
  await expect(code).toContainText('python');
  await expect(notebook.resultCells.first().locator('.out-stdout')).toHaveText('pi is 3.1416\n');
  await expect(notebook.explanationCells.first()).toContainText('pi is 3.1416');
  // Text the person typed is shown, never interpreted.
  await expect(notebook.userCells.nth(1)).toContainText('second <b>question</b>');
  await expect(notebook.codeCells.nth(1).locator('pre.code')).toHaveText(printed('second <b>question</b>'));
  await expect(notebook.resultCells.nth(1)).toContainText('second <b>question</b>');
  await expect(page.locator('.cell b')).toHaveCount(0);
  for (const cell of await notebook.cells.all()) {
    await expect(cell).toHaveAttribute('data-status', 'ok');
  }
  // Downloads work without scripts: they are data URLs.
  const download = notebook.resultCells.first().getByRole('link', { name: 'Download' });
  await expect(download).toHaveAttribute('href', /^data:text\/plain/);
  await expect(page.getByText('Ask something to start')).toBeHidden();
});

test('an unknown address answers 404 with a way back', async ({ page, pageErrors }) => {
  const paths = ['/sessions/not-a-session', '/nowhere'];
  for (const path of paths) {
    const response = await page.goto(path);
    expect(response?.status(), path).toBe(404);
    await expect(page.getByRole('link', { name: 'Start a new session' })).toBeVisible();
  }
  // The browser reports each 404 document itself; nothing else may go wrong.
  const expected = pageErrors.filter((e) => e.includes('status of 404 (Not Found)'));
  expect(expected).toHaveLength(paths.length);
  pageErrors.splice(0, pageErrors.length, ...pageErrors.filter((e) => !expected.includes(e)));
});

test('the model picker lists what the backend serves', async ({ page }) => {
  const notebook = new NotebookPage(page);
  await notebook.openNew();
  const picker = page.getByRole('combobox', { name: 'Model' });
  await expect(picker).toBeVisible();
  await expect(picker.locator('option')).toHaveText(['scripted']);
});

test('the sandbox picker offers the local jail and E2B', async ({ page }) => {
  const notebook = new NotebookPage(page);
  await notebook.openNew();
  const picker = page.getByRole('combobox', { name: 'Sandbox' });
  await expect(picker).toBeVisible();
  await expect(picker.locator('option')).toHaveText(['Local sandbox', 'E2B cloud', 'Browser (Pyodide)']);
});

test.describe('with JavaScript', () => {
  test.skip(({ javaScriptEnabled }) => !javaScriptEnabled, 'needs the hydrated page');

  test('picking E2B runs the next programs there, in a kernel of their own', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    const where = fenced("import os\nprint('where:', os.environ.get('E2B_SANDBOX', 'jail'))");
    await notebook.ask(where);
    await expect(notebook.resultCells.nth(0)).toContainText('where: jail');
    await notebook.waitTurnEnd();
    await page.getByRole('combobox', { name: 'Sandbox' }).selectOption({ label: 'E2B cloud' });
    await notebook.ask(fenced('x = 41\nprint("set")'));
    await notebook.waitTurnEnd();
    await notebook.ask(fenced('import os\nprint("where:", os.environ.get("E2B_SANDBOX"), x + 1)'));
    await expect(notebook.resultCells.nth(2)).toContainText('where: true 42');
    await notebook.waitTurnEnd();
  });

  test('an ask streams a code, a result and an explanation cell, in order', async ({ page }) => {
    const notebook = new NotebookPage(page);
    const frames = notebook.recordFrames();
    await notebook.openNew();
    await notebook.waitConnected();
    const code = 'total = 0\nfor n in range(1, 11):\n    total += n\nprint("sum", total)';
    await notebook.ask(fenced(code));
    await expect(notebook.message).toHaveValue('');
    await expect(notebook.explanationCells.first()).toHaveAttribute('data-status', 'ok');
    await notebook.waitTurnEnd();
    expect(await notebook.kinds()).toEqual(['You', 'Code', 'Result', 'Explanation']);
    const codeCell = notebook.codeCells.first();
    await expect(codeCell.locator('pre.code')).toHaveText(code);
    await expect(codeCell.locator('pre.code .hl-control').first()).toHaveText('for');
    await expect(codeCell).toContainText(/ok · \d+\.\d s/);
    await expect(notebook.resultCells.first().locator('.out-stdout')).toHaveText('sum 55\n');
    await expect(notebook.resultCells.first()).toContainText(/ok · \d+\.\d s/);
    await expect(notebook.explanationCells.first()).toContainText('sum 55');
    // Streamed: the code and the explanation came in several pieces.
    expect(frames.kinds.filter((k) => k === 'cell_delta').length).toBeGreaterThanOrEqual(4);
    expect(frames.kinds[0]).toBe('turn_started');
    expect(frames.kinds.at(-1)).toBe('turn_finished');
  });

  test('a failing program is fixed in a second, visible attempt', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.ask(fenced('print("fixed")', 'fail_first'));
    await expect(notebook.explanationCells.first()).toHaveAttribute('data-status', 'ok');
    expect(await notebook.kinds()).toEqual(['You', 'Code', 'Result', 'Code', 'Result', 'Explanation']);
    await expect(notebook.resultCells.first()).toHaveAttribute('data-status', 'error');
    await expect(notebook.resultCells.first().locator('.out-error')).toContainText('RuntimeError');
    await expect(notebook.codeCells.nth(1)).toContainText('attempt 2');
    await expect(notebook.codeCells.nth(1)).toHaveAttribute('data-final', 'true');
    await expect(notebook.codeCells.first()).toHaveAttribute('data-final', 'false');
    await expect(notebook.resultCells.nth(1).locator('.out-stdout')).toHaveText('fixed\n');
  });

  test('an explanation that invents a figure is never shown: it is rewritten in place', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    // The scripted model adds "The total is 12,345." to its first explanation.
    await notebook.ask(fenced('print("total:", 6 * 7)', 'invent_once'));
    await notebook.waitTurnEnd();
    expect(await notebook.kinds()).toEqual(['You', 'Code', 'Result', 'Explanation']);
    const standing = notebook.explanationCells.first();
    await expect(standing).toHaveAttribute('data-status', 'ok');
    await expect(standing).not.toHaveAttribute('data-withdrawn', 'true');
    await expect(standing).toContainText('total: 42');
    await expect(standing).not.toContainText('12,345');
    await expect(page.locator('section.cells')).not.toContainText('12,345');
  });

  test('Stop interrupts a long run and the next ask works', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.ask(fenced('import time\nprint("started", flush=True)\ntime.sleep(30)\nprint("never")'));
    const result = notebook.resultCells.first();
    await expect(result.locator('.out-stdout')).toHaveText('started\n');
    await expect(result).toHaveAttribute('data-status', 'streaming');
    await expect(result).toContainText('running');
    await notebook.stop.click();
    await expect(result).toHaveAttribute('data-status', 'cancelled');
    await expect(result).toContainText('stopped');
    await notebook.waitTurnEnd();
    await expect(notebook.explanationCells).toHaveCount(0);

    await notebook.ask(fenced('print("after stop")'));
    await expect(notebook.explanationCells.first()).toHaveAttribute('data-status', 'ok');
    await expect(notebook.resultCells.nth(1).locator('.out-stdout')).toHaveText('after stop\n');
  });

  test('a reload mid-stream resumes without loss or duplicates', async ({ page }) => {
    const notebook = new NotebookPage(page);
    const url = await notebook.openNew();
    await notebook.waitConnected();
    const code = Array.from({ length: 12 }, (_, i) => `print("line ${i}")`).join('\n');
    await notebook.ask(fenced(code, 'slow'));
    await expect(notebook.codeCells.first()).toHaveAttribute('data-status', 'streaming');
    await page.reload();
    await expect(page).toHaveURL(url);
    await expect(notebook.explanationCells.first()).toHaveAttribute('data-status', 'ok', { timeout: 25_000 });
    expect(await notebook.kinds()).toEqual(['You', 'Code', 'Result', 'Explanation']);
    await expect(notebook.codeCells.first().locator('pre.code')).toHaveText(code);
    const lines = Array.from({ length: 12 }, (_, i) => `line ${i}\n`).join('');
    await expect(notebook.resultCells.first().locator('.out-stdout')).toHaveText(lines);
  });

  test('the page follows new output until the reader scrolls up', async ({ page }) => {
    await page.setViewportSize({ width: 800, height: 500 });
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    const code = Array.from({ length: 40 }, (_, i) => `print("line ${i}")`).join('\n');
    await notebook.ask(fenced(code, 'slow'));
    const gap = () => page.evaluate(() => document.body.scrollHeight - (window.scrollY + window.innerHeight));
    const scrolled = () => page.evaluate(() => window.scrollY);
    // While the code streams in, the newest line stays in view.
    await expect.poll(scrolled, { timeout: 15_000 }).toBeGreaterThan(100);
    await expect.poll(gap).toBeLessThan(100);
    // Scrolled up, the reader stays where they are while more arrives.
    await page.mouse.wheel(0, -100_000);
    await expect.poll(scrolled).toBe(0);
    const height = await page.evaluate(() => document.body.scrollHeight);
    await expect.poll(() => page.evaluate(() => document.body.scrollHeight), { timeout: 15_000 }).toBeGreaterThan(height + 50);
    expect(await scrolled()).toBe(0);
    await notebook.stop.click();
    await notebook.waitTurnEnd();
  });

  test('Edit & run runs the edited code with no model', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.ask(fenced('x = 20\nprint(x)'));
    await expect(notebook.explanationCells.first()).toHaveAttribute('data-status', 'ok');
    await notebook.waitTurnEnd();
    await notebook.codeCells.first().getByRole('button', { name: 'Edit & run' }).click();
    const editor = page.getByRole('textbox', { name: 'Edit code' });
    await expect(editor).toHaveValue('x = 20\nprint(x)');
    await editor.fill('print(x * 2)');
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await expect(notebook.resultCells).toHaveCount(2);
    await expect(notebook.resultCells.nth(1).locator('.out-stdout')).toHaveText('40\n');
    await expect(notebook.codeCells.nth(1)).toContainText('edited');
    expect(await notebook.kinds()).toEqual(['You', 'Code', 'Result', 'Explanation', 'Code', 'Result']);
  });

  test('images and tables are shown, and HTML is sandboxed', async ({ page, pageErrors }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.ask(
      fenced(
        [
          'import matplotlib.pyplot as plt',
          'from IPython.display import display, HTML',
          'plt.plot([1, 2, 3], [1, 4, 9])',
          'plt.show()',
          'display(HTML("<table><tr><td>cell</td></tr></table><script>parent.document.title = \'pwned\'</script>"))',
        ].join('\n'),
      ),
    );
    await expect(notebook.explanationCells.first()).toHaveAttribute('data-status', 'ok', { timeout: 25_000 });
    const result = notebook.resultCells.first();
    const image = result.locator('img');
    await expect(image).toBeVisible();
    expect(await image.evaluate((img: HTMLImageElement) => img.naturalWidth)).toBeGreaterThan(100);
    // The figure says what it is of, and its bytes are in the page once.
    await expect(image).toHaveAttribute('alt', /^A figure for: /);
    expect(
      await page.evaluate(() => document.documentElement.outerHTML.split('data:image/png;base64,').length - 1),
    ).toBe(1);
    const [saved] = await Promise.all([
      page.waitForEvent('download'),
      result.getByRole('button', { name: 'Download PNG' }).click(),
    ]);
    expect(saved.suggestedFilename()).toMatch(/^figure-.*\.png$/);
    const frame = result.locator('iframe');
    await expect(frame).toHaveAttribute('sandbox', '');
    await expect(page.frameLocator('iframe').getByText('cell')).toBeVisible();
    // The frame's script could not rename the page: the title is the question's.
    await expect(page).toHaveTitle('import matplotlib.pyplot as plt · runcell');
    // The browser says it blocked the frame's script: that is the point.
    await expect.poll(() => pageErrors.some((e) => e.includes('Blocked script execution'))).toBe(true);
    pageErrors.splice(0, pageErrors.length, ...pageErrors.filter((e) => !e.includes('Blocked script execution')));
  });

  test('Shift+Enter starts a new line instead of sending', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.message.fill('line one');
    await notebook.message.press('Shift+Enter');
    await notebook.message.pressSequentially('line two');
    await expect(notebook.message).toHaveValue('line one\nline two');
    await expect(notebook.cells).toHaveCount(0);
    await notebook.send.click();
    await expect(notebook.codeCells.first().locator('pre.code')).toHaveText(printed('line one\nline two'));
    await expect(notebook.resultCells.first().locator('.out-stdout')).toHaveText('line one\nline two\n');
  });

  test('an empty message is refused and nothing is sent', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.ask('   ');
    await expect(notebook.problem).toHaveText('Not sent: the message is empty.');
    await expect(notebook.cells).toHaveCount(0);
  });

  test('the page reconnects after the socket drops', async ({ page }) => {
    const notebook = new NotebookPage(page);
    let connections = 0;
    await page.routeWebSocket(/\/ws\/sessions\//, (ws) => {
      connections += 1;
      const server = ws.connectToServer();
      if (connections === 1) {
        // The first connection dies right after the server's welcome.
        server.onMessage((message) => {
          ws.send(message);
          ws.close({ code: 1012, reason: 'test drops the link' });
          server.close();
        });
      }
    });
    await notebook.openNew();
    await expect.poll(() => connections).toBeGreaterThanOrEqual(2);
    await notebook.waitConnected();
    await notebook.ask('still here');
    await expect(notebook.resultCells.first().locator('.out-stdout')).toHaveText('still here\n');
  });
});

test('the home page makes a session only when asked, and asks its question', async ({ page, javaScriptEnabled }) => {
  await page.goto('/');
  await expect(page).toHaveURL(/\/$/);
  await expect(page.getByText('Ask something to start')).toBeVisible();
  const message = page.getByRole('textbox', { name: 'Message' });
  await message.fill('hello from the home page');
  await page.getByRole('button', { name: 'Ask', exact: true }).click();
  await expect(page).toHaveURL(/\/sessions\/[0-9a-f-]{36}$/);
  const asked = page.getByRole('article', { name: 'You' }).filter({ hasText: 'hello from the home page' });
  if (javaScriptEnabled) {
    await expect(asked).toBeVisible();
  } else {
    // Without JavaScript the page is what the server had at that moment.
    await expect
      .poll(async () => {
        await page.reload();
        return asked.count();
      })
      .toBeGreaterThan(0);
  }
});
