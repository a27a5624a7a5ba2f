import { readFileSync } from 'node:fs';
import type { Page } from '@playwright/test';
import { test, expect } from './fixtures';
import { NotebookPage } from './pages/notebook';

const fenced = (code: string) => '```python\n' + code + '\n```';

/** A session whose answer shows a data frame (asked through the API, so
 * that it works with JavaScript off too); returns the result cell. */
async function frameShown(page: Page, code: string[]) {
  const notebook = new NotebookPage(page);
  const url = await notebook.openNew();
  const id = url.split('/').pop() ?? '';
  const response = await page.request.post(`/api/sessions/${id}/ask`, {
    data: { text: fenced(['import pandas as pd', 'from IPython.display import display', ...code].join('\n')) },
  });
  expect(response.status()).toBe(200);
  expect(await response.text()).toContain('turn_finished');
  await page.reload();
  return notebook.resultCells.first();
}

const SALES = [
  'df = pd.DataFrame({"region": ["north", "South", "east", "west"], "units": [10, None, 9, 100], "price": [2.5, 3.0, 1.25, 4.0]})',
  'display(df)',
];

test.describe('tables', () => {
  test('a data frame is a table of the page, readable without scripts', async ({ page }) => {
    const result = await frameShown(page, SALES);
    const table = result.getByRole('table');
    await expect(table).toBeVisible();
    // No frame of foreign markup for a plain frame.
    await expect(result.locator('iframe')).toHaveCount(0);
    await expect(table.getByRole('columnheader')).toHaveText(['index', 'region', 'units', 'price']);
    await expect(table.getByRole('rowheader')).toHaveText(['0', '1', '2', '3']);
    await expect(table.locator('tbody tr').first().getByRole('cell')).toHaveText(['north', '10.0', '2.50']);
    // Numbers are right-aligned; text is not.
    const align = (name: string) =>
      table.getByRole('cell', { name, exact: true }).evaluate((cell) => getComputedStyle(cell).textAlign);
    expect(await align('100.0')).toBe('right');
    expect(await align('north')).toBe('left');
    await expect(result.locator('.table-size')).toHaveText('4 rows × 3 columns');
    // The box scrolls, and a keyboard can reach it.
    await expect(result.getByRole('region', { name: 'Table, 4 rows × 3 columns' })).toHaveAttribute('tabindex', '0');
  });

  test('a table reads in the dark theme', async ({ page }) => {
    await page.emulateMedia({ colorScheme: 'dark' });
    const result = await frameShown(page, SALES);
    const cell = result.getByRole('cell', { name: 'north' });
    const [color, background] = await cell.evaluate((c) => {
      // The first background that is painted, from the cell outwards.
      let node: Element | null = c;
      let bg = 'rgba(0, 0, 0, 0)';
      while (node && (bg === 'rgba(0, 0, 0, 0)' || bg === 'transparent')) {
        bg = getComputedStyle(node).backgroundColor;
        node = node.parentElement;
      }
      return [getComputedStyle(c).color, bg];
    });
    const luminance = (rgb: string) => {
      const [r, g, b] = (rgb.match(/\d+(\.\d+)?/g) ?? []).slice(0, 3).map(Number);
      return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    expect(luminance(background), background).toBeLessThan(80);
    expect(luminance(color), color).toBeGreaterThan(180);
  });


  test('a long frame holds all its rows, and says so when it holds fewer than the frame has', async ({ page }) => {
    // Issue 41: the table held only the ten rows pandas printed.
    const result = await frameShown(page, ['display(pd.DataFrame({"x": range(1000)}))', 'display(pd.DataFrame({"y": range(25000)}))']);
    const table = result.getByRole('table').first();
    await expect(result.locator('.table-size').first()).toHaveText('1000 rows × 1 column');
    await expect(table).toHaveAttribute('aria-rowcount', '1001');
    // Only the rows near the view are in the page.
    const inPage = await table.locator('tbody tr:not(.spacer)').count();
    expect(inPage).toBeGreaterThan(10);
    expect(inPage).toBeLessThanOrEqual(120);
    await expect(table).not.toContainText('...');
    await expect(result.locator('.table-size').nth(1)).toHaveText('10000 rows × 1 column shown, of 25000 rows × 1 column');
  });

  test('other HTML stays in its sandboxed frame, in the reader\'s theme', async ({ page, pageErrors }) => {
    await page.emulateMedia({ colorScheme: 'dark' });
    const result = await frameShown(page, [
      'from IPython.display import HTML',
      'display(HTML("<b>bold</b> and <table><tr><td>1</td></tr></table>"))',
      // Headers over two columns are more than a table of the page's.
      'display(pd.DataFrame([[1, 2]], columns=pd.MultiIndex.from_tuples([("a", "x"), ("a", "y")])))',
    ]);
    await expect(result.locator('iframe')).toHaveCount(2);
    await expect(result.getByRole('table')).toHaveCount(0);
    const frame = page.frameLocator('iframe').first();
    await expect(frame.locator('b')).toHaveText('bold');
    const scheme = await frame.locator('body').evaluate((b) => getComputedStyle(b).colorScheme);
    expect(scheme).toBe('light dark');
    // The browser says it refused the test's own script in the frame: that
    // is the frame's sandbox at work.
    pageErrors.splice(0, pageErrors.length, ...pageErrors.filter((e) => !e.includes('Blocked script execution')));
  });
});

test.describe('tables with scripts', () => {
  test.skip(({ javaScriptEnabled }) => !javaScriptEnabled, 'needs the hydrated page');

  test('a click on a header sorts the rows, numbers as numbers, missing values last', async ({ page }) => {
    const result = await frameShown(page, SALES);
    const table = result.getByRole('table');
    const regions = () => table.locator('tbody tr td:nth-of-type(1)').allTextContents();
    const units = table.getByRole('columnheader', { name: 'units' });
    await units.getByRole('button').click();
    await expect(units).toHaveAttribute('aria-sort', 'ascending');
    // 9 < 10 < 100 as numbers; the missing value last.
    await expect.poll(regions).toEqual(['east', 'north', 'west', 'South']);
    await units.getByRole('button').click();
    await expect(units).toHaveAttribute('aria-sort', 'descending');
    await expect.poll(regions).toEqual(['west', 'north', 'east', 'South']);
    const region = table.getByRole('columnheader', { name: 'region' });
    await region.getByRole('button').click();
    await expect(units).not.toHaveAttribute('aria-sort', /./);
    await expect.poll(regions).toEqual(['east', 'north', 'South', 'west']);
    // The keyboard sorts too.
    await region.getByRole('button').press('Enter');
    await expect(region).toHaveAttribute('aria-sort', 'descending');
  });

  test('a 200-row frame sorts, filters, scrolls and exports all 200 rows', async ({ page }) => {
    const result = await frameShown(page, ['display(pd.DataFrame({"n": range(200), "sq": [i * i for i in range(200)]}))']);
    const table = result.getByRole('table');
    await expect(result.locator('.table-size')).toHaveText('200 rows × 2 columns');
    const n = table.getByRole('columnheader', { name: 'n', exact: true });
    await n.getByRole('button').click();
    await n.getByRole('button').click();
    await expect(n).toHaveAttribute('aria-sort', 'descending');
    await expect(table.locator('tbody tr:not(.spacer)').first().getByRole('rowheader')).toHaveText('199');
    // Scrolled to its end, the box shows the last rows.
    await result.getByRole('region', { name: /^Table/ }).evaluate((box) => box.scrollTo(0, box.scrollHeight));
    await expect(table.getByRole('rowheader', { name: '0', exact: true })).toBeVisible();
    const [saved] = await Promise.all([page.waitForEvent('download'), result.getByRole('button', { name: 'Download CSV' }).click()]);
    const lines = readFileSync((await saved.path()) ?? '', 'utf8').trim().split('\r\n');
    expect(lines).toHaveLength(201);
    expect(lines[1]).toBe('199,199,39601');
    expect(lines[200]).toBe('0,0,0');
    // A filter keeps the rows that match, and the download follows it.
    await result.getByRole('searchbox', { name: 'Filter rows' }).fill('39601');
    await expect(result.locator('.table-size')).toHaveText('1 of 200 rows match · 200 rows × 2 columns');
    await expect(table.locator('tbody tr:not(.spacer)')).toHaveCount(1);
    const [filtered] = await Promise.all([page.waitForEvent('download'), result.getByRole('button', { name: 'Download CSV' }).click()]);
    expect(readFileSync((await filtered.path()) ?? '', 'utf8')).toBe(',n,sq\r\n199,199,39601\r\n');
  });

  test('Download CSV saves the rows as shown, and Copy table copies them', async ({ page, context }) => {
    await context.grantPermissions(['clipboard-read', 'clipboard-write']);
    const result = await frameShown(page, [
      'df = pd.DataFrame({"name": ["b, \\"quoted\\"", "=1+1"], "n": [2, 1]})',
      'display(df)',
    ]);
    await result.getByRole('columnheader', { name: 'n', exact: true }).getByRole('button').click();
    const [saved] = await Promise.all([
      page.waitForEvent('download'),
      result.getByRole('button', { name: 'Download CSV' }).click(),
    ]);
    expect(saved.suggestedFilename()).toMatch(/^table-.*\.csv$/);
    const csv = readFileSync((await saved.path()) ?? '', 'utf8');
    // Sorted by n; quoted as CSV; a formula is text.
    expect(csv).toBe(',name,n\r\n1,\'=1+1,1\r\n0,"b, ""quoted""",2\r\n');
    await result.getByRole('button', { name: 'Copy table' }).click();
    await expect(result.getByRole('button', { name: 'Copied' })).toBeVisible();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe('\tname\tn\n1\t=1+1\t1\n0\tb, "quoted"\t2');
  });
});
