import { test, expect } from './fixtures';
import { NotebookPage } from './pages/notebook';

const fenced = (code: string) => '```python\n' + code + '\n```';

test.describe('interactive charts', () => {
  test.skip(({ javaScriptEnabled }) => !javaScriptEnabled, 'needs the hydrated page');

  test('a plotly figure is drawn in its own frame from runcell\'s own files, and hovering a point shows its values', async ({ page }) => {
    const elsewhere: string[] = [];
    page.on('request', (request) => {
      const url = new URL(request.url());
      if (!['127.0.0.1', 'localhost'].includes(url.hostname) && url.protocol.startsWith('http')) elsewhere.push(request.url());
    });
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.ask(fenced(
      "import plotly.express as px\nfig = px.scatter(x=[1, 2, 3], y=[10, 30, 20], title='hover me')\nfig.show()",
    ));
    await notebook.waitTurnEnd();
    const frame = page.frameLocator('iframe[title="Interactive chart"]');
    await expect(frame.locator('.main-svg').first()).toBeVisible({ timeout: 30_000 });
    await expect(frame.locator('.gtitle')).toHaveText('hover me');
    // In the middle of the view, clear of the sticky top bar.
    await page.locator('iframe[title="Interactive chart"]').evaluate((e) => e.scrollIntoView({ block: 'center' }));
    const point = await frame.locator('.scatterlayer .point').nth(1).boundingBox();
    expect(point).not.toBeNull();
    const x = (point?.x ?? 0) + (point?.width ?? 0) / 2;
    const y = (point?.y ?? 0) + (point?.height ?? 0) / 2;
    await page.mouse.move(x - 20, y - 20);
    await page.mouse.move(x, y, { steps: 5 });
    await expect(frame.locator('.hoverlayer .hovertext')).toContainText('30');
    // The frame is sized to its chart and has no way into the page.
    const box = await page.locator('iframe[title="Interactive chart"]').boundingBox();
    expect(box?.height ?? 0).toBeGreaterThan(200);
    await expect(page.locator('iframe[title="Interactive chart"]')).toHaveAttribute('sandbox', 'allow-scripts');
    expect(elsewhere).toEqual([]);
  });

  test('a Vega-Lite spec shown as its MIME type is drawn with vega-lite', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.ask(fenced(
      "from IPython.display import display\nspec = {'$schema': 'https://vega.github.io/schema/vega-lite/v5.json', 'data': {'values': [{'a': 1, 'b': 4}, {'a': 2, 'b': 6}, {'a': 3, 'b': 5}]}, 'mark': 'bar', 'encoding': {'x': {'field': 'a', 'type': 'ordinal'}, 'y': {'field': 'b', 'type': 'quantitative'}}}\ndisplay({'application/vnd.vegalite.v5+json': spec, 'text/plain': 'a bar chart'}, raw=True)",
    ));
    await notebook.waitTurnEnd();
    const frame = page.frameLocator('iframe[title="Interactive chart"]');
    await expect(frame.locator('svg.marks')).toBeVisible({ timeout: 30_000 });
    await expect(frame.locator('.mark-rect path')).toHaveCount(3);
  });

  test('charts follow the theme switch, Plotly and Vega-Lite alike', async ({ page }) => {
    await page.emulateMedia({ colorScheme: 'light' });
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.ask(fenced(
      "import plotly.express as px\nfrom IPython.display import display\npx.bar(x=[1, 2], y=[3, 4]).show()\nspec = {'data': {'values': [{'a': 1, 'b': 4}, {'a': 2, 'b': 6}]}, 'mark': 'bar', 'encoding': {'x': {'field': 'a', 'type': 'ordinal'}, 'y': {'field': 'b', 'type': 'quantitative'}}}\ndisplay({'application/vnd.vegalite.v5+json': spec, 'text/plain': 'a bar chart'}, raw=True)",
    ));
    await notebook.waitTurnEnd();
    const plotly = page.frameLocator('iframe[title="Interactive chart"] >> nth=0');
    const vega = page.frameLocator('iframe[title="Interactive chart"] >> nth=1');
    await expect(plotly.locator('.main-svg').first()).toBeVisible({ timeout: 30_000 });
    await expect(vega.locator('svg.marks')).toBeVisible({ timeout: 30_000 });
    const paper = () => plotly.locator('.main-svg').first().evaluate((svg) => getComputedStyle(svg).backgroundColor);
    const label = () => vega.locator('.role-axis-label text').first().getAttribute('fill');
    const scheme = () => vega.locator('html').evaluate((root) => (root as HTMLElement).style.colorScheme);
    const lightPaper = await paper();
    const lightLabel = await label();
    expect(await scheme()).toBe('light');
    // system → light → dark
    const toggle = () => page.getByRole('button', { name: /^Theme:/ }).click();
    await toggle();
    await toggle();
    await expect(page.locator('html')).toHaveAttribute('data-theme', 'dark');
    await expect.poll(paper).toBe('rgb(17, 17, 17)');
    await expect.poll(scheme).toBe('dark');
    await expect.poll(label).not.toBe(lightLabel);
    // dark → system (light here): as drawn at first.
    await toggle();
    await expect.poll(paper).toBe(lightPaper);
    await expect.poll(label).toBe(lightLabel);
  });
});
