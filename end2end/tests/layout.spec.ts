import type { Page } from '@playwright/test';
import { test, expect } from './fixtures';
import { NotebookPage } from './pages/notebook';

/** A message whose fenced block the scripted model runs as written. */
const fenced = (code: string) => '```python\n' + code + '\n```';

const PHONE = { width: 390, height: 844 };

/** A new session with a finished turn whose output is long (asked through
 * the API with the page's own cookie, so that it works with JavaScript off). */
async function longSession(page: Page): Promise<string> {
  const notebook = new NotebookPage(page);
  const url = await notebook.openNew();
  const id = url.split('/').pop() ?? '';
  const response = await page.request.post(`/api/sessions/${id}/ask`, {
    data: { text: fenced('for i in range(120):\n    print("a fairly long line of output number", i)') },
  });
  expect(response.status()).toBe(200);
  expect(await response.text()).toContain('turn_finished');
  await page.reload();
  return id;
}

test.describe('on a phone', () => {
  test.use({ viewport: PHONE });

  test('the page fits the screen, the sidebar is a drawer and the composer stays in view', async ({ page }) => {
    await longSession(page);
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    expect(width).toBeLessThanOrEqual(PHONE.width);

    // The list of sessions is closed until asked for, then slides over.
    const sessions = page.getByRole('navigation', { name: 'Sessions' });
    await expect(sessions).toBeHidden();
    const drawer = page.locator('details.sidebar > summary');
    await drawer.click();
    await expect(sessions).toBeVisible();
    // The drawer: the list, Kernels in use and the account, from the left edge.
    const box = await page.locator('.sidebar-drawer').boundingBox();
    expect(box?.x).toBe(0);
    expect(box?.width ?? 0).toBeLessThanOrEqual(PHONE.width);
    // The backdrop beside it closes it.
    await page.mouse.click(PHONE.width - 10, PHONE.height / 2);
    await expect(sessions).toBeHidden();

    // Halfway down a long result, Send is still on screen.
    await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight / 2));
    await expect(page.getByRole('button', { name: 'Send' })).toBeInViewport();
    await page.evaluate(() => window.scrollTo(0, 0));
    await expect(page.getByRole('button', { name: 'Send' })).toBeInViewport();
  });
});

test.describe('fixed chrome on a phone', () => {
  test.use({ viewport: PHONE });

  test('the header is one row of at most 56 px, and header and composer take at most a quarter of the screen', async ({ page }) => {
    await longSession(page);
    const header = page.locator('header.topbar');
    const composer = page.locator('form.prompt');
    // The hydrated page may still follow the conversation down (and the
    // header slide away) after the reload: back at the top until the
    // header has slid in whole.
    await expect
      .poll(async () => {
        await page.evaluate(() => window.scrollTo(0, 0));
        return (await header.boundingBox())?.y ?? -1;
      })
      .toBeGreaterThanOrEqual(0);
    await expect(header).toBeInViewport({ ratio: 1 });
    const headerBox = await header.boundingBox();
    expect(headerBox?.height ?? 999).toBeLessThanOrEqual(56);
    const composerBox = await composer.boundingBox();
    expect((headerBox?.height ?? 999) + (composerBox?.height ?? 999)).toBeLessThanOrEqual(0.25 * PHONE.height);
    // The list of sessions is not under the header.
    const drawer = await page.locator('details.sidebar > summary').boundingBox();
    expect(drawer?.y ?? 0).toBeGreaterThanOrEqual((headerBox?.y ?? 0) + (headerBox?.height ?? 0) - 1);
    // The composer grows while typing (up to a part of the screen).
    if (await page.evaluate(() => document.documentElement.classList.contains('js'))) {
      const message = page.getByRole('textbox', { name: 'Message' });
      const one = (await message.boundingBox())?.height ?? 0;
      await message.fill('a\nb\nc\nd\ne');
      const five = (await message.boundingBox())?.height ?? 0;
      expect(five).toBeGreaterThan(one + 40);
      expect(five).toBeLessThanOrEqual(0.3 * PHONE.height + 1);
    }
  });

  test('the header hides while scrolling down and comes back on the way up', async ({ page }, info) => {
    test.skip(info.project.name === 'no-js', 'a live page needs scripts');
    await longSession(page);
    const header = page.locator('header.topbar');
    await page.evaluate(() => window.scrollTo(0, 0));
    await expect(header).toBeInViewport();
    await page.mouse.wheel(0, 600);
    await expect(header).not.toBeInViewport();
    await page.mouse.wheel(0, -200);
    await expect(header).toBeInViewport();
  });

  test('"Jump to latest" is a round button over the corner: the composer does not grow', async ({ page }, info) => {
    test.skip(info.project.name === 'no-js', 'a live page needs scripts');
    const id = await longSession(page);
    const composer = page.locator('form.prompt');
    const jump = page.getByRole('button', { name: /Jump to latest/ });
    await expect.poll(async () => (await composer.boundingBox())?.height ?? 0).toBeGreaterThan(0);
    const before = (await composer.boundingBox())?.height ?? 0;
    await page.mouse.move(200, 300);
    await page.mouse.wheel(0, -1500);
    await expect(jump).toBeVisible();
    expect((await composer.boundingBox())?.height).toBe(before);
    // 44 px, whole on the screen, above the message box (not on it).
    const box = await jump.boundingBox();
    const message = await page.getByRole('textbox', { name: 'Message' }).boundingBox();
    expect(box?.width).toBeGreaterThanOrEqual(44);
    expect(box?.height).toBeGreaterThanOrEqual(44);
    expect((box?.x ?? -1) + (box?.width ?? 999)).toBeLessThanOrEqual(PHONE.width);
    expect((box?.y ?? 999) + (box?.height ?? 999)).toBeLessThanOrEqual(message?.y ?? 0);
    // What arrives since is counted on it; its name says so in words.
    const asked = await page.request.post(`/api/sessions/${id}/ask`, { data: { text: fenced('print(1)') } });
    expect(asked.status()).toBe(200);
    await expect(jump).toHaveAccessibleName(/^Jump to latest \(\d+ new cells?\)$/);
    const badge = () => jump.evaluate((el) => getComputedStyle(el, '::after').content);
    await expect.poll(badge).toMatch(/^"[1-9]\d*"/);
    expect((await composer.boundingBox())?.height).toBe(before);
    await jump.click();
    await expect(jump).toBeHidden();
  });
});

test.describe('on a touch screen', () => {
  test.use({ viewport: PHONE, hasTouch: true, isMobile: true });

  test('every control is at least 44 px tall', async ({ page }) => {
    await longSession(page);
    await page.locator('details.sidebar > summary').click();
    const small = await page
      .locator('button, select, summary, a.button, .upload-button, textarea')
      .evaluateAll((all) =>
        all
          .filter((e) => e.checkVisibility())
          .map((e) => ({ what: e.outerHTML.slice(0, 80), height: e.getBoundingClientRect().height }))
          .filter((e) => e.height > 0 && e.height < 43.5),
      );
    expect(small).toEqual([]);
  });
});

test.describe('with the keyboard', () => {
  test.skip(({ javaScriptEnabled }) => !javaScriptEnabled, 'needs the hydrated page');

  test('the skip link is the first stop and leads to the message box', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await page.keyboard.press('Tab');
    const skip = page.getByRole('link', { name: 'Skip to the message box' });
    await expect(skip).toBeFocused();
    await expect(skip).toBeInViewport();
    await page.keyboard.press('Enter');
    await expect(page).toHaveURL(/#message$/);
    await expect(page.getByRole('textbox', { name: 'Message' })).toBeFocused();
  });

  test('Edit & run: the editor takes focus, Escape gives it back, Ctrl+Enter runs', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.ask(fenced('print(6 * 7)'));
    await notebook.waitTurnEnd();
    const code = notebook.codeCells.first();
    const edit = code.getByRole('button', { name: 'Edit & run' });
    await edit.click();
    const editor = code.getByRole('textbox', { name: 'Edit code' });
    await expect(editor).toBeFocused();
    await page.keyboard.press('Escape');
    await expect(editor).toBeHidden();
    await expect(edit).toBeFocused();

    await edit.press('Enter');
    await expect(editor).toBeFocused();
    await editor.fill('print(6 * 8)');
    await page.keyboard.press('Control+Enter');
    await expect(notebook.resultCells.last()).toContainText('48', { timeout: 25_000 });
  });

  test('a screen reader hears the turn start and end, and Stop leaves focus in the message box', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    const said = page.locator('.visually-hidden[role="status"]');
    await notebook.ask(fenced('import time\nfor i in range(30):\n    print(i, flush=True)\n    time.sleep(0.5)'));
    await expect(said).toHaveText(/Waiting for the model|Writing code|Starting the program|Running/);
    await expect(notebook.resultCells.first()).toContainText('1', { timeout: 25_000 });
    await notebook.stop.click();
    await expect(said).toHaveText('Stopped.');
    await expect(notebook.message).toBeFocused();

    await notebook.ask(fenced('print("done")'));
    await expect(said).toHaveText('The answer is ready.', { timeout: 25_000 });
  });

  test('a turn that ends while Stop has the keyboard leaves it in the message box', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.ask(fenced('import time\nprint("waiting", flush=True)\ntime.sleep(2)\nprint("over")'));
    await expect(notebook.resultCells.first()).toContainText('waiting', { timeout: 25_000 });
    await notebook.stop.focus();
    await expect(notebook.stop).toBeFocused();
    await expect(notebook.resultCells.first()).toContainText('over', { timeout: 25_000 });
    await expect(notebook.stop).toBeHidden({ timeout: 25_000 });
    await expect(notebook.message).toBeFocused();
  });

  test('Escape closes the sidebar drawer', async ({ page }) => {
    await page.setViewportSize(PHONE);
    await longSession(page);
    const sessions = page.getByRole('navigation', { name: 'Sessions' });
    const drawer = page.locator('details.sidebar > summary');
    await drawer.click();
    await expect(sessions).toBeVisible();
    await page.keyboard.press('Escape');
    await expect(sessions).toBeHidden();
    await expect(drawer).toBeFocused();
  });
});
