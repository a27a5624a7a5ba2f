import { expect, test } from './fixtures';
import { NotebookPage } from './pages/notebook';

/** A message whose fenced block the scripted model runs as written. */
const fenced = (code: string) => '```python\n' + code + '\n```';

// Issue 46: a question whose program needs a package the sandbox's Python
// lacks is answered; the install is a cell of its own, and the line the
// package index wrote says what it served. (The index reaches the upstream
// the host's pip uses.)
test('a program that needs a missing package gets it installed and answers', async ({ page, javaScriptEnabled }) => {
  const notebook = new NotebookPage(page);
  await notebook.openNew();
  if (javaScriptEnabled) {
    await notebook.waitConnected();
    await notebook.ask(fenced('import humanize\nprint(humanize.naturalsize(10**6))'));
  } else {
    await notebook.message.fill(fenced('import humanize\nprint(humanize.naturalsize(10**6))'));
    await notebook.send.click();
  }
  await expect(notebook.explanationCells.first()).toContainText('1.0 MB', { timeout: 60_000 });
  await expect(notebook.codeCells).toHaveCount(3);
  await expect(notebook.codeCells.nth(1)).toContainText('%pip install humanize');
  const installed = notebook.resultCells.nth(1).locator('.out-package');
  await expect(installed).toHaveCount(1);
  await expect(installed).toContainText(/^Installed humanize \d/);
  await expect(notebook.resultCells.nth(2)).toContainText('1.0 MB');
});
