import { expect, test } from './fixtures';
import { NotebookPage } from './pages/notebook';

/** A message whose fenced block the scripted model runs as written. */
const fenced = (code: string) => '```python\n' + code + '\n```';

test('the sandbox picker offers Python in the page', async ({ page }) => {
  const notebook = new NotebookPage(page);
  await notebook.openNew();
  const picker = page.getByRole('combobox', { name: 'Sandbox' });
  await expect(picker.locator('option')).toHaveText(['Local sandbox', 'E2B cloud', 'Browser (Pyodide)']);
});

test.describe('the Browser sandbox', () => {
  test.skip(({ javaScriptEnabled }) => !javaScriptEnabled, "Python in the page needs the page's scripts");
  // Pyodide loads in a few seconds; more on a busy machine.
  test.setTimeout(180_000);

  test('Python runs in the page, which is cross-origin isolated, and keeps its state', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    expect(await page.evaluate(() => self.crossOriginIsolated)).toBe(true);
    await notebook.pickBrowser();
    await notebook.ask(fenced('import sys; print(sys.platform)'));
    await expect(notebook.resultCells.nth(0).locator('.out-stdout')).toHaveText('emscripten\n');
    await expect(notebook.explanationCells.nth(0)).toContainText('emscripten');
    await notebook.waitTurnEnd();
    await notebook.ask(fenced('x = 41\nx + 1'));
    await expect(notebook.resultCells.nth(1)).toContainText('42');
    await notebook.waitTurnEnd();
    await notebook.ask(fenced('for i in range(3):\n    print("line", i, x)'));
    await expect(notebook.resultCells.nth(2).locator('.out-stdout')).toHaveText('line 0 41\nline 1 41\nline 2 41\n');
    await notebook.waitTurnEnd();

    // After a reload the pick stands, in a new Python, and the result says so.
    await page.reload();
    await notebook.waitConnected();
    await expect(page.getByRole('combobox', { name: 'Sandbox' })).toHaveValue('browser');
    await expect(page.getByRole('status', { name: 'Python in this page' })).toHaveText('Python ready', { timeout: 60_000 });
    await notebook.ask(fenced('print("x" in globals())'));
    await expect(notebook.resultCells.nth(3)).toContainText('started afresh');
    await expect(notebook.resultCells.nth(3).locator('.out-stdout')).toHaveText('False\n');
    await notebook.waitTurnEnd();
  });

  test('Stop interrupts an endless loop at once, and the next ask works', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.pickBrowser();
    await notebook.ask(fenced('n = 0\nprint("looping")\nwhile True:\n    n += 1'));
    const result = notebook.resultCells.nth(0);
    await expect(result.locator('.out-stdout')).toHaveText('looping\n');
    await notebook.stop.click();
    // Interrupted through the shared buffer: the turn ends within a second.
    await expect(result).toHaveAttribute('data-status', 'cancelled', { timeout: 1_000 });
    await notebook.waitTurnEnd();
    await expect(result).not.toContainText('was ended');
    // The same Python goes on, with what the loop left.
    await notebook.ask(fenced('print("counted", n > 0)'));
    await expect(notebook.resultCells.nth(1).locator('.out-stdout')).toHaveText('counted True\n');
    await notebook.waitTurnEnd();
  });

  test('vendored packages load by name, even after a stop while they load; others say they are not available offline', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.pickBrowser();
    await notebook.ask(fenced('x = 41\nprint("set")'));
    await expect(notebook.resultCells.nth(0).locator('.out-stdout')).toHaveText('set\n', { timeout: 60_000 });
    await notebook.waitTurnEnd();
    // Stopped while sympy loads or imports: the page's Python is not ended
    // (its variables stay), and nothing half-imported is left behind for the
    // next import to trip on.
    await notebook.ask(fenced('import sympy'));
    const stopped = notebook.resultCells.nth(1);
    await expect(stopped).toBeVisible();
    await notebook.stop.click();
    await expect(stopped).toHaveAttribute('data-status', 'cancelled', { timeout: 30_000 });
    await notebook.waitTurnEnd();
    await expect(stopped).not.toContainText('starting again');
    await notebook.ask(fenced('import sympy\nprint(sympy.factor("x**2 - 1"), x + 1)'));
    // sympy and mpmath load from the vendored wheels and import before the
    // program's time starts: over 30 s when the machine's two cores are
    // shared with the rest of the suite.
    await expect(notebook.resultCells.nth(2).locator('.out-stdout')).toHaveText('(x - 1)*(x + 1) 42\n', { timeout: 90_000 });
    await notebook.waitTurnEnd();
    await notebook.ask(fenced('import numpy'));
    await expect(notebook.resultCells.nth(3)).toContainText('not available offline');
    await notebook.waitTurnEnd();
  });
});
