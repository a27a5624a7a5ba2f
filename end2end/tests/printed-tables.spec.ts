import { readFileSync } from 'node:fs';
import type { Page } from '@playwright/test';
import { test, expect } from './fixtures';
import { NotebookPage } from './pages/notebook';
import { problems } from './axe';

const fenced = (code: string) => '```python\n' + code + '\n```';

/** The scripted model runs the question's fenced program: it prints a label,
 * then a frame alone (as models write it, with `print`, not `display`), and
 * makes a figure it draws nothing on. */
const PROGRAM = [
  'import pandas as pd',
  'import matplotlib.pyplot as plt',
  'df = pd.DataFrame({"region": ["north", "south", "east"], "units": [10, 30, 20]})',
  'print("Top regions:")',
  'print(df.sort_values("units", ascending=False))',
  'fig, ax = plt.subplots()',
].join('\n');

/** A session that asked for `PROGRAM` (through the API, so that it works
 * with JavaScript off too); returns its result cell. */
async function printedFrame(page: Page) {
  const notebook = new NotebookPage(page);
  const url = await notebook.openNew();
  const id = url.split('/').pop() ?? '';
  const response = await page.request.post(`/api/sessions/${id}/ask`, {
    data: { text: 'Show them as a table\n' + fenced(PROGRAM) },
  });
  expect(response.status()).toBe(200);
  expect(await response.text()).toContain('turn_finished');
  await page.reload();
  return notebook.resultCells.first();
}

for (const [screen, viewport] of [
  ['on a desktop', { width: 1280, height: 800 }],
  ['on a phone', { width: 390, height: 844 }],
] as const) {
  test.describe(`printed tables ${screen}`, () => {
    test.use({ viewport });

    test('a printed frame is the page\'s table, after what was printed before it', async ({ page }) => {
      const result = await printedFrame(page);
      const table = result.getByRole('table');
      await expect(table).toBeVisible();
      await expect(result.locator('iframe')).toHaveCount(0);
      await expect(table.getByRole('columnheader')).toHaveText(['index', 'region', 'units']);
      await expect(table.getByRole('rowheader')).toHaveText(['1', '2', '0']);
      await expect(table.locator('tbody tr').first().getByRole('cell')).toHaveText(['south', '30']);
      await expect(result.locator('.table-size')).toHaveText('3 rows × 2 columns');
      // The label printed first comes first; the frame's text is not
      // printed beside its table.
      const text = (await result.textContent()) ?? '';
      expect(text.indexOf('Top regions:')).toBeGreaterThanOrEqual(0);
      expect(text.indexOf('Top regions:')).toBeLessThan(text.indexOf('south'));
      await expect(result.locator('pre').filter({ hasText: 'south' })).toHaveCount(0);
      // The blank figure is not offered; the page says it was left out.
      await expect(result.getByRole('img')).toHaveCount(0);
      await expect(result.getByRole('button', { name: /PNG/ })).toHaveCount(0);
      await expect(result).toContainText('a figure with nothing drawn on it was left out');
    });
  });

  test.describe(`printed tables with scripts ${screen}`, () => {
    test.skip(({ javaScriptEnabled }) => !javaScriptEnabled, 'needs the hydrated page');
    test.use({ viewport });

    test('a printed frame sorts, copies and downloads as CSV, with no accessibility problem', async ({
      page,
      context,
    }) => {
      await context.grantPermissions(['clipboard-read', 'clipboard-write']);
      const result = await printedFrame(page);
      const table = result.getByRole('table');
      const units = table.getByRole('columnheader', { name: 'units' });
      await units.getByRole('button').click();
      await expect(units).toHaveAttribute('aria-sort', 'ascending');
      await expect
        .poll(() => table.locator('tbody tr td:nth-of-type(1)').allTextContents())
        .toEqual(['north', 'east', 'south']);
      const [saved] = await Promise.all([
        page.waitForEvent('download'),
        result.getByRole('button', { name: 'Download CSV' }).click(),
      ]);
      expect(readFileSync((await saved.path()) ?? '', 'utf8')).toBe(
        ',region,units\r\n0,north,10\r\n2,east,20\r\n1,south,30\r\n',
      );
      await result.getByRole('button', { name: 'Copy table' }).click();
      await expect(result.getByRole('button', { name: 'Copied' })).toBeVisible();
      expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(
        '\tregion\tunits\n0\tnorth\t10\n2\teast\t20\n1\tsouth\t30',
      );
      expect(await problems(page, { iframes: false })).toEqual([]);
    });
  });
}
