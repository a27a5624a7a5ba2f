import { readFileSync } from 'node:fs';
import { expect, test } from './fixtures';
import { NotebookPage } from './pages/notebook';

/** A message whose fenced block the scripted model runs as written. */
const fenced = (code: string) => '```python\n' + code + '\n```';

const SALES = 'region,amount\nnorth,10\nsouth,32\neast,7\n';

test.describe('files', () => {
  test.skip(({ javaScriptEnabled }) => !javaScriptEnabled, 'uploads need the page\'s scripts');

  test('an uploaded CSV is read by the code; what the code writes downloads and can be shared', async ({ page, browser }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    const panel = page.getByRole('region', { name: 'Files' });
    await expect(panel).toContainText('No files yet');

    await page.getByLabel('Upload files').setInputFiles({
      name: 'sales.csv',
      mimeType: 'text/csv',
      buffer: Buffer.from(SALES),
    });
    await expect(panel.getByRole('link', { name: 'sales.csv' })).toBeVisible();
    await expect(panel).toContainText('39 B');

    await notebook.ask(
      fenced(
        "import csv\nrows = list(csv.DictReader(open('/home/user/sales.csv')))\nprint('rows:', len(rows))\n" +
          "with open('out.csv', 'w') as f:\n    f.write('total\\n' + str(sum(int(r['amount']) for r in rows)) + '\\n')",
      ),
    );
    const result = notebook.resultCells.nth(0);
    await expect(result.locator('.out-stdout')).toHaveText('rows: 3\n');
    await notebook.waitTurnEnd();

    // The panel shows what the code wrote, and it downloads as written.
    const written = panel.getByRole('link', { name: 'out.csv' });
    await expect(written).toBeVisible();
    const [download] = await Promise.all([page.waitForEvent('download'), written.click()]);
    expect(download.suggestedFilename()).toBe('out.csv');
    expect(readFileSync(await download.path(), 'utf8')).toBe('total\n49\n');
    // The result cell offers it too.
    const offered = result.getByRole('link', { name: 'out.csv (9 B)' });
    await expect(offered).toBeVisible();
    const [again] = await Promise.all([page.waitForEvent('download'), offered.click()]);
    expect(readFileSync(await again.path(), 'utf8')).toBe('total\n49\n');
    // The uploaded file comes back byte for byte.
    const [back] = await Promise.all([
      page.waitForEvent('download'),
      panel.getByRole('link', { name: 'sales.csv' }).click(),
    ]);
    expect(readFileSync(await back.path(), 'utf8')).toBe(SALES);

    // Shared with its files: someone with the link downloads what the
    // code wrote, from the list and from the result cell.
    await page.getByLabel('with its files').check();
    await page.getByRole('button', { name: 'Share' }).click();
    const link = page.locator('a.share-link');
    await expect(link).toHaveAttribute('href', /^\/s\//);
    await expect(page.getByLabel('with its files')).toBeChecked();
    const stranger = await browser.newContext();
    const other = await stranger.newPage();
    await other.goto((await link.getAttribute('href')) ?? '');
    const sharedFiles = other.getByRole('region', { name: 'Files' });
    await expect(sharedFiles.getByRole('link', { name: 'sales.csv' })).toBeVisible();
    const sharedOffer = new NotebookPage(other).resultCells.nth(0).getByRole('link', { name: 'out.csv (9 B)' });
    const [fromLink] = await Promise.all([other.waitForEvent('download'), sharedOffer.click()]);
    expect(readFileSync(await fromLink.path(), 'utf8')).toBe('total\n49\n');
    await stranger.close();
  });

  test('an upload never replaces a file unless asked; files can be dropped and deleted', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    const panel = page.getByRole('region', { name: 'Files' });
    const input = page.getByLabel('Upload files');
    await input.setInputFiles({ name: 'a.txt', mimeType: 'text/plain', buffer: Buffer.from('first') });
    await expect(panel.getByRole('link', { name: 'a.txt' })).toBeVisible();
    await input.setInputFiles({ name: 'a.txt', mimeType: 'text/plain', buffer: Buffer.from('second!') });
    await expect(panel).toContainText('a.txt is there already.');
    await expect(panel).toContainText('5 B');
    await panel.getByRole('button', { name: 'Replace' }).click();
    await expect(panel).toContainText('7 B');
    await expect(panel.getByText('is there already')).toBeHidden();

    // Dropped anywhere on the page.
    const drop = await page.evaluateHandle(() => {
      const data = new DataTransfer();
      data.items.add(new File(['x,y\n1,2\n'], 'dropped.csv', { type: 'text/csv' }));
      return data;
    });
    const column = page.locator('.column');
    await column.dispatchEvent('dragover', { dataTransfer: drop });
    await column.dispatchEvent('drop', { dataTransfer: drop });
    await expect(panel.getByRole('link', { name: 'dropped.csv' })).toBeVisible();

    await panel.getByRole('button', { name: 'Delete a.txt' }).click();
    await expect(panel.getByRole('link', { name: 'a.txt' })).toBeHidden();
    await expect(panel.getByRole('link', { name: 'dropped.csv' })).toBeVisible();
  });
});
