import { expect, test } from './fixtures';
import { NotebookPage } from './pages/notebook';

/** The scripted model's answer to a message without code: a program that prints it. */
const printed = (text: string) => '```python\nprint(' + JSON.stringify(text) + ')\n```';

test('the notebook shell renders', async ({ page, javaScriptEnabled }) => {
  const notebook = new NotebookPage(page);
  await notebook.openNew();
  await expect(page).toHaveTitle('runcell');
  await expect(page.getByRole('link', { name: 'runcell' })).toBeVisible();
  await expect(page.getByRole('link', { name: 'New session' })).toBeVisible();
  await expect(page.getByText('Ask something to start')).toBeVisible();
  await expect(notebook.message).toBeVisible();
  await expect(notebook.send).toBeVisible();
  const notice = page.getByText('JavaScript is off: this notebook is read-only.');
  if (javaScriptEnabled) {
    await notebook.waitConnected();
    await expect(notebook.send).toBeEnabled();
    await expect(notice).toBeHidden();
  } else {
    await expect(notebook.connection).toHaveText('offline');
    await expect(notebook.send).toBeDisabled();
    await expect(notice).toBeVisible();
  }
});

test('a session with history renders in full', async ({ page, browser }) => {
  // Fill a session from a hydrated page, then open it in the project's page.
  const writer = await browser.newContext({ javaScriptEnabled: true });
  const writerPage = new NotebookPage(await writer.newPage());
  const url = await writerPage.openNew();
  await writerPage.waitConnected();
  await writerPage.ask('first question');
  await expect(writerPage.answerCells.last()).toHaveAttribute('data-status', 'ok');
  await writerPage.ask('second <b>question</b>');
  await expect(writerPage.answerCells).toHaveCount(2);
  await expect(writerPage.answerCells.last()).toHaveAttribute('data-status', 'ok');
  await writer.close();

  const notebook = new NotebookPage(page);
  await page.goto(url);
  await expect(notebook.cells).toHaveCount(4);
  await expect(notebook.userCells.nth(0)).toContainText('first question');
  await expect(notebook.answerCells.nth(1)).toContainText('second <b>question</b>');
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

test.describe('with JavaScript', () => {
  test.skip(({ javaScriptEnabled }) => !javaScriptEnabled, 'needs the hydrated page');

  test('Enter sends and the answer streams back in several frames', async ({ page }) => {
    const notebook = new NotebookPage(page);
    const frames = notebook.recordFrames();
    await notebook.openNew();
    await notebook.waitConnected();
    const text = 'how many r are there in the word strawberry';
    await notebook.ask(text);
    await expect(notebook.message).toHaveValue('');
    await expect(notebook.userCells).toHaveText([/how many r are there/]);
    const answer = notebook.answerCells.first();
    await expect(answer).toHaveAttribute('data-status', 'ok');
    await expect(answer.locator('.cell-body')).toHaveText(printed(text));
    await expect(answer).toContainText(/ok · \d+\.\d s/);
    expect(frames.kinds.filter((k) => k === 'cell_delta').length).toBeGreaterThanOrEqual(3);
    expect(frames.kinds).toEqual([
      'user_message',
      'cell_started',
      ...frames.kinds.slice(2, -1).map(() => 'cell_delta'),
      'cell_finished',
    ]);
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
    await expect(notebook.answerCells.first()).toHaveAttribute('data-status', 'ok');
    await expect(notebook.answerCells.first().locator('.cell-body')).toHaveText(printed('line one\nline two'));
  });

  test('an empty message is refused and nothing is sent', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.ask('   ');
    await expect(notebook.problem).toHaveText('Not sent: the message is empty.');
    await expect(notebook.cells).toHaveCount(0);
  });

  test('a reload mid-stream resumes without loss or duplicates', async ({ page }) => {
    const notebook = new NotebookPage(page);
    const url = await notebook.openNew();
    await notebook.waitConnected();
    const words = Array.from({ length: 60 }, (_, i) => `word${i}`);
    await notebook.ask(words.join(' '));
    await expect(notebook.answerCells.first()).toHaveAttribute('data-status', 'streaming');
    await page.reload();
    await expect(page).toHaveURL(url);
    const answer = notebook.answerCells.first();
    await expect(answer).toHaveAttribute('data-status', 'ok');
    await expect(answer.locator('.cell-body')).toHaveText(printed(words.join(' ')));
    await expect(notebook.cells).toHaveCount(2);
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
    await expect(notebook.answerCells.first()).toHaveAttribute('data-status', 'ok');
    await expect(notebook.answerCells.first().locator('.cell-body')).toHaveText(printed('still here'));
  });
});

test('the model picker lists what the backend serves', async ({ page }) => {
  const notebook = new NotebookPage(page);
  await notebook.openNew();
  const picker = page.getByRole('combobox', { name: 'Model' });
  await expect(picker).toBeVisible();
  await expect(picker.locator('option')).toHaveText(['scripted']);
});

test.describe('answers from the model', () => {
  test.skip(({ javaScriptEnabled }) => !javaScriptEnabled, 'needs the hydrated page');

  test('a program the model writes is shown in its answer', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.ask('Run this:\n```python\nprint(6 * 7)\n```');
    const answer = notebook.answerCells.first();
    await expect(answer).toHaveAttribute('data-status', 'ok');
    await expect(answer.locator('.cell-body')).toHaveText('```python\nprint(6 * 7)\n```');
  });
});
