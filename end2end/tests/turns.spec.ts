import { test, expect } from './fixtures';
import { NotebookPage } from './pages/notebook';

const fenced = (code: string) => '```python\n' + code + '\n```';

/** A session with one answered question (asked through the API, so that it
 * works with JavaScript off too). */
async function asked(notebook: NotebookPage, text: string) {
  const url = await notebook.openNew();
  const id = url.split('/').pop() ?? '';
  const response = await notebook.page.request.post(`/api/sessions/${id}/ask`, { data: { text } });
  expect(response.status()).toBe(200);
  expect(await response.text()).toContain('turn_finished');
  await notebook.page.reload();
}

test.describe('compact turns', () => {
  test('a question reads as markdown, its code fenced and its lines kept', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await asked(notebook, 'Run **this**, please:\nsecond line <i>raw</i>\n\n' + fenced('print(6 * 7)'));
    const question = notebook.userCells.first();
    await expect(question.locator('strong')).toHaveText('this');
    // The fences are gone: the code is a block of its own.
    await expect(question.locator('pre code')).toHaveText('print(6 * 7)\n');
    await expect(question).not.toContainText('```');
    // A line break typed is a line break shown; markup typed is text.
    await expect(question.locator('br')).toHaveCount(1);
    await expect(question).toContainText('second line <i>raw</i>');
    await expect(question.locator('i')).toHaveCount(0);
    await expect(notebook.resultCells.first().locator('.out-stdout')).toHaveText('42\n');
  });

  test('asked in the page, a question and its explanation read as markdown as they arrive', async ({
    page,
    javaScriptEnabled,
  }) => {
    test.skip(!javaScriptEnabled, 'the live page: the server sends their markup with the events');
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.ask('Print it, *please*:\n\n' + fenced('print("**bold** and `code`")'));
    await notebook.waitTurnEnd();
    const question = notebook.userCells.first();
    await expect(question.locator('em')).toHaveText('please');
    await expect(question.locator('pre code')).toHaveText('print("**bold** and `code`")\n');
    const explanation = notebook.explanationCells.last();
    await expect(explanation.locator('strong')).toHaveText('bold');
    await expect(explanation.locator('p code')).toHaveText('code');
    await expect(explanation).not.toContainText('**');
  });

  test('code folds behind a line saying what is hidden', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await asked(notebook, fenced('a = 6\nb = 7\nprint(a * b)'));
    const code = notebook.codeCells.first();
    const block = code.locator('pre.code');
    await expect(block).toBeVisible();
    await code.getByText('Hide code').click();
    await expect(block).toBeHidden();
    const summary = code.getByText('Show code (python, 3 lines)');
    await expect(summary).toBeVisible();
    // The keyboard opens it again.
    await summary.focus();
    await page.keyboard.press('Enter');
    await expect(block).toBeVisible();
    await expect(code.getByText('Hide code')).toBeVisible();
  });
});
