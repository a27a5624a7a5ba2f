import type { Locator, Page } from '@playwright/test';
import { test, expect } from './fixtures';
import { NotebookPage } from './pages/notebook';
import { problems } from './axe';

// The header is one row at any width, whatever sandbox is picked; on a
// phone what does not fit is behind "More", and nothing leaves the screen.
// Tables keep their numbers whole, and controls are big enough to touch.
//
// RUNCELL_SCREENSHOTS=1 saves the pictures in docs/screenshots/.

const fenced = (code: string) => '```python\n' + code + '\n```';
const PHONE = { width: 390, height: 844 };
/** A row of the header: its padding, a 32 px control, its border. */
const ONE_ROW = 64;
/** Local is picked first: each of these is a change. */
const SANDBOXES = ['E2B cloud', 'Local sandbox', 'Browser (Pyodide)'];
const shots = process.env.RUNCELL_SCREENSHOTS ? '../docs/screenshots' : null;

/** The header's controls that are on show (links, buttons, pickers, the
 * import button), with their boxes. */
async function headerControls(page: Page) {
  return page
    .locator('header.topbar')
    .locator('a, button, select, label.import-notebook, .python-status, .conn')
    .evaluateAll((all) =>
      all
        // The sandbox note floats over the page, under the header.
        .filter((e) => e.checkVisibility() && !e.closest('.backend-note-box'))
        .map((e) => {
          const box = e.getBoundingClientRect();
          return {
            what: (e.getAttribute('aria-label') ?? e.textContent ?? '').trim().slice(0, 30),
            left: box.left,
            right: box.right,
            top: box.top,
            bottom: box.bottom,
            width: box.width,
            height: box.height,
          };
        }),
    );
}

const pageWidth = (page: Page) => page.evaluate(() => document.scrollingElement?.scrollWidth ?? 0);
const height = async (locator: Locator) => (await locator.boundingBox())?.height ?? 999;

for (const width of [1280, 1024]) {
  test.describe(`a desktop ${width} px wide`, () => {
    test.use({ viewport: { width, height: 800 } });

    test('the header is one row for every sandbox, and after a reload', async ({ page }, info) => {
      // The page's own Python loads before its status is measured.
      test.setTimeout(90_000);
      const notebook = new NotebookPage(page);
      await notebook.openNew();
      const header = page.locator('header.topbar');
      expect(await height(header)).toBeLessThanOrEqual(ONE_ROW);
      if (info.project.name === 'no-js') return;
      await notebook.waitConnected();
      const picker = page.getByRole('combobox', { name: 'Sandbox' });
      for (const label of SANDBOXES) {
        if (width < 1200) {
          // Below 75rem the pickers are in the row, Import and Theme under "More".
          await expect(page.getByRole('button', { name: 'More' })).toBeVisible();
        }
        await picker.selectOption({ label });
        // What the change means is said over the page, not in the row.
        await expect(page.locator('#backend-note')).toContainText('From the next question');
        if (label.startsWith('Browser')) {
          const python = page.getByRole('status', { name: 'Python in this page' });
          await expect(python).toBeVisible();
          // Once loaded, Python's status is read whole, never cut with an
          // ellipsis (a long loading stage may be: its title has it whole).
          await expect(python).toHaveAttribute('data-state', 'ready', { timeout: 40_000 });
          expect(await python.evaluate((e) => e.scrollWidth - e.clientWidth), label).toBeLessThanOrEqual(1);
        }
        expect(await height(header), label).toBeLessThanOrEqual(ONE_ROW);
        const controls = await headerControls(page);
        const headerBox = await header.boundingBox();
        for (const c of controls) {
          expect(c.right, `${c.what} at ${label}`).toBeLessThanOrEqual(width);
          expect(c.bottom, `${c.what} at ${label}`).toBeLessThanOrEqual((headerBox?.y ?? 0) + (headerBox?.height ?? 0));
        }
        expect(await pageWidth(page)).toBeLessThanOrEqual(width);
      }
      // The note is put away, and the keyboard is back on the picker.
      await page.getByRole('button', { name: 'Dismiss the note' }).click();
      await expect(page.locator('#backend-note')).toBeHidden();
      await expect(picker).toBeFocused();
      await page.reload();
      await notebook.waitConnected();
      expect(await height(header)).toBeLessThanOrEqual(ONE_ROW);
      if (shots && width === 1280) await header.screenshot({ path: `${shots}/header-desktop-1280.png` });
    });

    test('the header passes axe, with "More" open where there is one', async ({ page }, info) => {
      const notebook = new NotebookPage(page);
      await notebook.openNew();
      if (info.project.name === 'hydrated') {
        await notebook.waitConnected();
        const more = page.getByRole('button', { name: 'More' });
        if (await more.isVisible()) {
          await more.click();
          await expect(more).toHaveAttribute('aria-expanded', 'true');
          await expect(page.getByRole('button', { name: /^Theme:/ })).toBeVisible();
          expect(await pageWidth(page)).toBeLessThanOrEqual(width);
          if (shots) await page.locator('header.topbar').screenshot({ path: `${shots}/header-desktop-${width}-more.png` });
        }
        // axe runs in the page: scripts only.
        expect(await problems(page, { iframes: false })).toEqual([]);
      }
    });
  });
}

test.describe('a phone', () => {
  test.use({ viewport: PHONE, hasTouch: true, isMobile: true });

  test('every header control is on the screen, through "More", and nothing scrolls sideways', async ({ page }, info) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    // The new session's URL shows before its stylesheet applies (a page
    // without scripts gets there by a form's redirect): measured once loaded.
    await page.waitForLoadState('load');
    const header = page.locator('header.topbar');
    expect(await height(header)).toBeLessThanOrEqual(56);
    expect(await pageWidth(page)).toBeLessThanOrEqual(PHONE.width);
    if (info.project.name === 'hydrated') {
      await notebook.waitConnected();
      const more = page.getByRole('button', { name: 'More' });
      await expect(more).toHaveAttribute('aria-expanded', 'false');
      await expect(page.getByRole('combobox', { name: 'Sandbox' })).toBeHidden();
      // The keyboard opens it; Escape closes it and leaves the focus on it.
      await more.focus();
      await page.keyboard.press('Enter');
      await expect(more).toHaveAttribute('aria-expanded', 'true');
      const picker = page.getByRole('combobox', { name: 'Sandbox' });
      await expect(picker).toBeVisible();
      await expect(page.getByRole('combobox', { name: 'Model' })).toBeVisible();
      await expect(page.getByRole('button', { name: /^Theme:/ })).toBeVisible();
      await picker.selectOption({ label: 'Browser (Pyodide)' });
      await expect(page.getByRole('status', { name: 'Python in this page' })).toBeVisible();
      if (shots) await header.screenshot({ path: `${shots}/phone-header-more.png` });
      await picker.focus();
      await page.keyboard.press('Escape');
      await expect(more).toHaveAttribute('aria-expanded', 'false');
      await expect(more).toBeFocused();
      await expect(picker).toBeHidden();
      // A press outside the header closes it too.
      await more.click();
      await expect(more).toHaveAttribute('aria-expanded', 'true');
      await page.mouse.click(PHONE.width / 2, PHONE.height / 2);
      await expect(more).toHaveAttribute('aria-expanded', 'false');
      await expect(picker).toBeHidden();
      await more.click();
    }
    const controls = await headerControls(page);
    expect(controls.length).toBeGreaterThanOrEqual(info.project.name === 'hydrated' ? 7 : 3);
    for (const c of controls) {
      expect(c.left, c.what).toBeGreaterThanOrEqual(0);
      expect(c.right, c.what).toBeLessThanOrEqual(PHONE.width);
      expect(c.bottom, c.what).toBeLessThanOrEqual(PHONE.height);
    }
    expect(await pageWidth(page)).toBeLessThanOrEqual(PHONE.width);
    // The model's whole name shows.
    const model = page.getByRole('combobox', { name: 'Model' });
    if (await model.isVisible()) {
      expect(await model.evaluate((s: HTMLSelectElement) => s.scrollWidth <= s.clientWidth)).toBe(true);
    }
    if (info.project.name === 'hydrated') expect(await problems(page, { iframes: false })).toEqual([]);
  });

  test('the home page shows the theme switch whole', async ({ page }, info) => {
    await page.goto('/');
    const theme = page.getByRole('button', { name: /^Theme:/ });
    await expect(theme).toBeInViewport({ ratio: 1 });
    const box = await theme.boundingBox();
    expect((box?.x ?? 999) + (box?.width ?? 999)).toBeLessThanOrEqual(PHONE.width);
    expect(await theme.evaluate((b) => b.scrollWidth <= b.clientWidth)).toBe(true);
    expect(await pageWidth(page)).toBeLessThanOrEqual(PHONE.width);
    if (info.project.name === 'hydrated') expect(await problems(page)).toEqual([]);
  });

  test('a table scrolls in its own box and its numbers are whole', async ({ page }) => {
    const notebook = new NotebookPage(page);
    const id = (await notebook.openNew()).split('/').pop() ?? '';
    const code = [
      'import pandas as pd',
      'from IPython.display import display',
      'display(pd.DataFrame({"where": ["a rather long place name that is wider than a phone", "b"], "count": [178, 111]}))',
    ].join('\n');
    const response = await page.request.post(`/api/sessions/${id}/ask`, { data: { text: fenced(code) } });
    expect(response.status()).toBe(200);
    expect(await response.text()).toContain('turn_finished');
    await page.reload();
    const result = notebook.resultCells.first();
    const box = result.getByRole('region', { name: 'Table, 2 rows × 2 columns' });
    await expect(box).toHaveAttribute('tabindex', '0');
    await expect(result.getByRole('cell', { name: '178', exact: true })).toBeAttached();
    const cut = await result.locator('td.num').evaluateAll((cells) =>
      cells.filter((c) => c.scrollWidth > c.clientWidth).map((c) => c.textContent),
    );
    expect(cut).toEqual([]);
    const styles = await result.locator('td.num').first().evaluate((c) => getComputedStyle(c).textOverflow);
    expect(styles).toBe('clip');
    // Wider than the phone: it scrolls inside its box, not the page.
    expect(await box.evaluate((b) => b.scrollWidth > b.clientWidth)).toBe(true);
    expect(await pageWidth(page)).toBeLessThanOrEqual(PHONE.width);
    if (shots) await result.screenshot({ path: `${shots}/phone-table.png` });
  });

  test('small controls are 44 px each way, and a file name breaks at its separators', async ({ page }, info) => {
    test.skip(info.project.name === 'no-js', 'versions and files need scripts');
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.ask(fenced('open("sales_2024.csv", "w").write("n\\n1\\n")\nprint("written")'));
    await notebook.waitTurnEnd();
    await notebook.userCells.first().getByRole('button', { name: 'Regenerate' }).click();
    await notebook.waitTurnEnd();
    const versions = notebook.userCells.first().getByRole('navigation', { name: 'Versions of this question' });
    await expect(versions).toContainText('2 / 2');
    const files = page.getByRole('region', { name: 'Files' });
    const file = files.getByRole('link', { name: 'sales_2024.csv' });
    await expect(file).toBeVisible();
    // One line: the name was not broken inside a word.
    const lines = await file.evaluate((a) => {
      const range = document.createRange();
      range.selectNodeContents(a);
      return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
    });
    expect(lines).toBe(1);

    await page.locator('details.sidebar > summary').click();
    const targets: [string, Locator][] = [
      ['Previous version', versions.getByRole('button', { name: 'Previous version' })],
      ['Next version', versions.getByRole('button', { name: 'Next version' })],
      ['with its files', page.locator('label.share-files')],
      ['⋯', page.locator('.entry-actions > summary').first()],
      ['Search sessions', page.getByRole('searchbox', { name: 'Search sessions' })],
      ['More', page.getByRole('button', { name: 'More' })],
      ['runcell (the way home)', page.locator('.topbar a.brand')],
    ];
    for (const [what, target] of targets) {
      const box = await target.boundingBox();
      expect(box?.height ?? 0, what).toBeGreaterThanOrEqual(44);
      expect(box?.width ?? 0, what).toBeGreaterThanOrEqual(44);
    }
    // The box inside "with its files" is drawn at 20 px, not the default 13.
    const tick = await page.locator('label.share-files input').boundingBox();
    expect(tick?.width ?? 0).toBeGreaterThanOrEqual(19);
    if (shots) {
      await page.keyboard.press('Escape');
      await files.screenshot({ path: `${shots}/phone-files.png` });
    }
  });
});
