// Screenshots for a closing note: a session with an answered question, on a
// phone and a desktop, light and dark. Usage: node screenshots.mjs URL DIR
import { launch, newSession } from './chromium.mjs';

const [base, dir] = process.argv.slice(2);
const browser = await launch();
const setup = await browser.newPage();
await setup.goto(base + '/');
// The first screen, then a new session (opening `/` makes none).
await setup.screenshot({ path: `${dir}/first-screen.png`, fullPage: false });
const id = await newSession(setup);
const code = [
  'import matplotlib.pyplot as plt, pandas as pd',
  'from IPython.display import display',
  'df = pd.DataFrame({"region": ["north", "south", "east"], "revenue": [1200.5, 980.25, 1530.0]})',
  'display(df)',
  'print("top region:", df.loc[df.revenue.idxmax(), "region"])',
  'plt.bar(df.region, df.revenue); plt.title("Revenue by region"); plt.show()',
  'print(r"the mean is $\\bar{x} = \\frac{1}{n}\\sum_i x_i$")',
].join('\n');
const r = await setup.request.post(`${base}/api/sessions/${id}/ask`, { data: { text: '```python\n' + code + '\n```' } });
await r.text();
// Regenerated once: the question shows its versions (‹ 2 / 2 ›).
const again = await setup.request.post(`${base}/api/sessions/${id}/ask`, {
  data: { text: '```python\n' + code + '\n```', alternative_to: 1 },
});
await again.text();
const cookies = await setup.context().cookies();
for (const [name, viewport, mobile] of [['phone', { width: 390, height: 844 }, true], ['desktop', { width: 1280, height: 900 }, false]]) {
  for (const scheme of ['light', 'dark']) {
    const context = await browser.newContext({ viewport, colorScheme: scheme, isMobile: mobile, hasTouch: mobile });
    await context.addCookies(cookies);
    const page = await context.newPage();
    await page.goto(`${base}/sessions/${id}`);
    await page.waitForSelector('article[aria-label="Explanation"]');
    await page.waitForTimeout(1500);
    await page.screenshot({ path: `${dir}/${name}-${scheme}.png`, fullPage: false });
    // And the top of the answer: the question, the code and the table.
    await page.locator('article[aria-label="You"]').first().scrollIntoViewIfNeeded();
    await page.evaluate(() => window.scrollTo(0, 0));
    // The phone header slides back in over 0.2 s.
    await page.waitForTimeout(500);
    await page.screenshot({ path: `${dir}/${name}-${scheme}-top.png`, fullPage: false });
    await context.close();
  }
}
// "Kernels in use": two more notebooks that ran code, seen from the first.
for (const n of [1, 2]) {
  const other = await newSession(setup);
  const ran = await setup.request.post(`${base}/api/sessions/${other}/ask`, {
    data: { text: '```python\nkept = ' + n + '\nprint("notebook ' + n + '")\n```' },
  });
  await ran.text();
}
const desktop = await browser.newContext({ viewport: { width: 1280, height: 900 } });
await desktop.addCookies(cookies);
const page = await desktop.newPage();
await page.goto(`${base}/sessions/${id}`);
const kernels = page.getByRole('region', { name: /Kernels in use/ });
await kernels.waitFor();
await kernels.screenshot({ path: `${dir}/kernels-in-use.png` });
await browser.close();
