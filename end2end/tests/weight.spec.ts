import type { Page } from '@playwright/test';
import { test, expect } from './fixtures';
import { NotebookPage } from './pages/notebook';

const fenced = (code: string) => '```python\n' + code + '\n```';

/** A session whose answer drew one figure (asked through the API);
 * returns its id. */
async function plotted(page: Page): Promise<string> {
  const notebook = new NotebookPage(page);
  const url = await notebook.openNew();
  const id = url.split('/').pop() ?? '';
  const code = ['import matplotlib.pyplot as plt', 'plt.plot([1, 2, 3], [1, 4, 9])', 'plt.title("Squares")', 'plt.show()'];
  const response = await page.request.post(`/api/sessions/${id}/ask`, { data: { text: fenced(code.join('\n')) } });
  expect(await response.text()).toContain('turn_finished');
  return id;
}

test('a session\'s page names its figure by address: the bytes are in neither its markup nor its state', async ({
  page,
}) => {
  const id = await plotted(page);
  const response = await page.goto(`/sessions/${id}`);
  const html = (await response?.text()) ?? '';
  expect(html.length).toBeLessThan(150_000);
  // No base64 PNG anywhere in the document (markup or hydration state).
  expect(html).not.toContain('iVBOR');
  const figure = new NotebookPage(page).resultCells.first().locator('img');
  await expect(figure).toHaveAttribute('src', new RegExp(`^/sessions/${id}/figures/\\d+\\.png$`));
  await expect.poll(() => figure.evaluate((img: HTMLImageElement) => img.naturalWidth)).toBeGreaterThan(100);
  await expect(figure).toHaveAttribute('alt', /^A figure for: /);
  // Download is a plain link to the same bytes (it works without scripts).
  const download = new NotebookPage(page).resultCells.first().getByRole('link', { name: 'Download PNG' });
  const [saved] = await Promise.all([page.waitForEvent('download'), download.click()]);
  expect(saved.suggestedFilename()).toMatch(/^figure-.*\.png$/);
  // Someone else cannot read it.
  const src = (await figure.getAttribute('src')) ?? '';
  const stranger = await page.context().browser()?.newContext();
  const other = await stranger?.request.get(src);
  expect(other?.status()).toBe(404);
  await stranger?.close();
});

test('a share page loads no bundle and still shows and offers its figure', async ({ page, browser }) => {
  const id = await plotted(page);
  const { path } = await (await page.request.post(`/api/sessions/${id}/share`)).json();
  const reader = await (await browser.newContext()).newPage();
  const scripts: string[] = [];
  reader.on('request', (request) => {
    if (/\.(wasm|js|mjs)$/.test(request.url())) scripts.push(request.url());
  });
  await reader.goto(path);
  const figure = new NotebookPage(reader).resultCells.first().locator('img');
  await expect(figure).toHaveAttribute('src', /^\/s\/[^/]+\/figures\/\d+\.png$/);
  await expect.poll(() => figure.evaluate((img: HTMLImageElement) => img.naturalWidth)).toBeGreaterThan(100);
  const [saved] = await Promise.all([
    reader.waitForEvent('download'),
    new NotebookPage(reader).resultCells.first().getByRole('link', { name: 'Download PNG' }).click(),
  ]);
  expect(saved.suggestedFilename()).toMatch(/^figure-.*\.png$/);
  expect(scripts).toEqual([]);
  expect(await reader.evaluate(() => document.documentElement.classList.contains('js'))).toBe(false);
  // Revoked, the figure goes with the link.
  const src = (await figure.getAttribute('src')) ?? '';
  expect((await page.request.delete(`/api/sessions/${id}/share`)).status()).toBe(204);
  expect((await reader.request.get(src)).status()).toBe(404);
  await reader.context().close();
});
