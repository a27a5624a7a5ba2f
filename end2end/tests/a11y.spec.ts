import { readFileSync } from 'node:fs';
import type { Page } from '@playwright/test';
import { test, expect } from './fixtures';
import { NotebookPage } from './pages/notebook';

/** axe-core, the accessibility auditor, injected into each page it checks. */
const AXE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

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

/** The serious and critical problems axe-core finds in the page as it is. */
async function problems(page: Page) {
  await page.addScriptTag({ content: AXE });
  return page.evaluate(async () => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const axe = (window as any).axe;
    // Not inside output frames: they hold the program's markup, sandboxed
    // without scripts (axe cannot run there), not the page's own.
    const result = await axe.run(document, { resultTypes: ['violations'], iframes: false });
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    return result.violations
      .filter((v: any) => v.impact === 'serious' || v.impact === 'critical')
      .map((v: any) => ({
        rule: v.id,
        impact: v.impact,
        where: v.nodes.slice(0, 5).map((n: any) => `${n.target.join(' ')}: ${n.failureSummary ?? ''}`),
      }));
  });
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
