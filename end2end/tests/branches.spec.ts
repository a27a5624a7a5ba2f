import { test, expect } from './fixtures';
import { NotebookPage } from './pages/notebook';
import { problems } from './axe';

// Issue 41: editing a question or regenerating its answer keeps the old
// version as a branch (‹ 1/2 ›); the kernel follows the branch on show, and
// a share link shows the branch that was on show when it was made.

const fenced = (code: string) => '```python\n' + code + '\n```';

test.beforeEach(({}, info) => {
  test.skip(info.project.name === 'no-js', 'editing needs scripts');
});

test('an edited question is a new version; the old one stays, and the kernel follows the version on show', async ({ page }) => {
  const notebook = new NotebookPage(page);
  const id = (await notebook.openNew()).split('/').pop();
  await notebook.waitConnected();
  await notebook.ask(fenced('a = 1\nprint("a is", a)'));
  await notebook.waitTurnEnd();
  await notebook.ask(fenced('b = a + 1\nprint("b is", b)'));
  await notebook.waitTurnEnd();
  await expect(notebook.resultCells.nth(1)).toContainText('b is 2');

  // Edit the second question: its answer is replaced on the page, not lost.
  const second = notebook.userCells.nth(1);
  await second.getByRole('button', { name: 'Edit', exact: true }).click();
  const editor = second.getByRole('textbox', { name: 'Edit the question' });
  await expect(editor).toBeFocused();
  await editor.fill(fenced('b = a + 10\nprint("b is", b)'));
  await editor.press('Enter');
  await notebook.waitTurnEnd();
  await expect(notebook.userCells).toHaveCount(2);
  await expect(notebook.resultCells.nth(1)).toContainText('b is 11');
  const versions = notebook.userCells.nth(1).getByRole('navigation', { name: 'Versions of this question' });
  await expect(versions).toContainText('2 / 2');
  // The kernel had run the old version: this branch's programs ran first.
  await expect(notebook.userCells.nth(1).locator('.restored')).toHaveText(
    'Variables rebuilt for this version: 1 earlier program re-ran first.',
  );

  // Back to version 1: its cells are shown again, and a question asked
  // there sees its variables (b = 2), not the other version's.
  await versions.getByRole('button', { name: 'Previous version' }).click();
  await expect(notebook.userCells.nth(1).getByRole('navigation', { name: 'Versions of this question' })).toContainText('1 / 2');
  await expect(notebook.resultCells.nth(1)).toContainText('b is 2');
  await notebook.ask(fenced('print("now b is", b)'));
  await notebook.waitTurnEnd();
  await expect(notebook.resultCells.nth(2)).toContainText('now b is 2');
  await expect(notebook.userCells.nth(2).locator('.restored')).toHaveText(
    'Variables rebuilt for this version: 2 earlier programs re-ran first.',
  );
  // The turn is under way now (its result shows): wait for its end. The
  // wait after asking can pass before Stop ever shows, on a slow machine,
  // and a link made mid-turn rightly ends before that turn.
  await notebook.waitTurnEnd();

  // A share link made now shows this branch; the page keeps it on reload.
  const { path } = await (await page.request.post(`/api/sessions/${id}/share`)).json();
  await page.reload();
  await expect(notebook.resultCells).toHaveCount(3);
  await expect(notebook.resultCells.nth(2)).toContainText('now b is 2');
  await page.goto(path);
  const shared = new NotebookPage(page);
  await expect(shared.userCells).toHaveCount(3);
  await expect(shared.resultCells.nth(1)).toContainText('b is 2');
  await expect(shared.conversation).not.toContainText('b is 11');
  await expect(shared.userCells.nth(1).getByRole('navigation', { name: 'Versions of this question' })).toContainText('1 / 2');
});

test('Regenerate asks the same question again as a new version', async ({ page }) => {
  const notebook = new NotebookPage(page);
  await notebook.openNew();
  await notebook.waitConnected();
  await notebook.ask(fenced('import random\nprint("drawn", random.random() < 2)'));
  await notebook.waitTurnEnd();
  const question = notebook.userCells.first();
  await question.getByRole('button', { name: 'Regenerate' }).click();
  await notebook.waitTurnEnd();
  await expect(notebook.userCells).toHaveCount(1);
  const versions = notebook.userCells.first().getByRole('navigation', { name: 'Versions of this question' });
  await expect(versions).toContainText('2 / 2');
  await expect(versions.getByRole('button', { name: 'Next version' })).toBeDisabled();
  // The switcher and the question's actions pass axe, light and dark.
  for (const colorScheme of ['light', 'dark'] as const) {
    await page.emulateMedia({ colorScheme });
    expect(await problems(page, { iframes: false })).toEqual([]);
  }
  await expect(notebook.resultCells).toHaveCount(1);
  await expect(notebook.resultCells.first()).toContainText('drawn True');
  // The new version's result was checked against the first's, on its program.
  await expect(page.getByRole('note').filter({ hasText: 'Checked against version 1' })).toHaveText(
    'Checked against version 1: it printed the same result, so the two approaches agree.',
  );
  await versions.getByRole('button', { name: 'Previous version' }).click();
  await expect(notebook.userCells.first().getByRole('navigation', { name: 'Versions of this question' })).toContainText('1 / 2');
  await expect(notebook.resultCells).toHaveCount(1);
});
