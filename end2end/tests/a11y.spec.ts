import type { Page } from '@playwright/test';
import { test, expect } from './fixtures';
import { NotebookPage } from './pages/notebook';
import { problems as axeProblems } from './axe';

/** Not inside output frames: they hold the program's markup, sandboxed
 * without scripts (axe cannot run there), not the page's own. */
const problems = (page: Page) => axeProblems(page, { iframes: false });

const fenced = (code: string) => '```python\n' + code + '\n```';

/** A session with a question answered by text, a table and a figure: every
 * kind of cell a notebook shows (asked through the API, so that it works
 * with JavaScript off too). */
async function answeredSession(page: Page): Promise<string> {
  const notebook = new NotebookPage(page);
  const url = await notebook.openNew();
  const id = url.split('/').pop() ?? '';
  const code = [
    'import matplotlib.pyplot as plt, pandas as pd',
    'from IPython.display import display',
    'df = pd.DataFrame({"region": ["north", "south"], "revenue": [1200.5, 980.25]})',
    'display(df)',
    'print("total", df.revenue.sum())',
    'plt.bar(df.region, df.revenue)',
    'plt.title("Revenue by region")',
    'plt.show()',
    '1 / 0',
  ].join('\n');
  const response = await page.request.post(`/api/sessions/${id}/ask`, { data: { text: fenced(code) } });
  expect(response.status()).toBe(200);
  expect(await response.text()).toContain('turn_finished');
  await page.reload();
  return id;
}

/** Drops the browser's reports that an output frame refused to run a
 * script (axe-core reaching into frames): that refusal is the frame's
 * sandbox at work. */
function dropFrameRefusals(pageErrors: string[]) {
  const kept = pageErrors.filter((e) => !e.includes("Blocked script execution in 'about:srcdoc'"));
  pageErrors.splice(0, pageErrors.length, ...kept);
}


for (const colorScheme of ['light', 'dark'] as const) {
  test.describe(`in ${colorScheme} mode`, () => {
    test.use({ colorScheme });
    // axe-core runs as a script in the page; the markup it checks is the
    // same with scripts off (the server renders it).
    test.skip(({ javaScriptEnabled }) => !javaScriptEnabled, 'axe-core runs in the page');

    test('the notebook has no serious or critical accessibility problem', async ({ page, pageErrors }) => {
      await answeredSession(page);
      await expect(new NotebookPage(page).resultCells.first()).toBeVisible();
      expect(await problems(page)).toEqual([]);
      dropFrameRefusals(pageErrors);
    });

    test('a phone page with code in a question and a failed attempt has none', async ({ page, pageErrors }) => {
      await page.setViewportSize({ width: 390, height: 844 });
      const notebook = new NotebookPage(page);
      const url = await notebook.openNew();
      const id = url.split('/').pop() ?? '';
      // A first attempt that fails, then the fix; a long line in the question.
      const text = '#scripted: fail_first\nRun this, it has a long line:\n' + fenced(`print("${'x'.repeat(150)}")`);
      const response = await page.request.post(`/api/sessions/${id}/ask`, { data: { text } });
      expect(await response.text()).toContain('turn_finished');
      await page.reload();
      await expect(notebook.codeCells).toHaveCount(2);
      expect(await problems(page)).toEqual([]);
      dropFrameRefusals(pageErrors);
    });

    test('a share page has none', async ({ page, pageErrors }) => {
      const id = await answeredSession(page);
      const shared = await page.request.post(`/api/sessions/${id}/share`);
      const { path } = await shared.json();
      await page.goto(path);
      await expect(new NotebookPage(page).resultCells.first()).toBeVisible();
      expect(await problems(page)).toEqual([]);
      dropFrameRefusals(pageErrors);
    });
  });
}
