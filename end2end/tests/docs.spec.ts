import type { Browser, BrowserContextOptions, Page } from '@playwright/test';
import { test, expect } from './fixtures';
import { problems } from './axe';

const DOCS = '/v1/docs/';
const PHONE = { width: 390, height: 844 };

/** A page of its own with scripts on: axe-core runs as a script, and the
 * reference page has none of its own, so what it checks is the same page
 * the no-js project reads. Like the fixture's page, it fails on an error
 * logged in the page. */
async function withScripts<T>(
  browser: Browser,
  use: (page: Page) => Promise<T>,
  options: BrowserContextOptions = {},
): Promise<T> {
  const context = await browser.newContext({ ...options, javaScriptEnabled: true });
  const errors: string[] = [];
  try {
    const page = await context.newPage();
    page.on('pageerror', (error) => errors.push(`uncaught: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error') errors.push(`console: ${message.text()}`);
    });
    const result = await use(page);
    expect(errors, 'errors in the page').toEqual([]);
    return result;
  } finally {
    await context.close();
  }
}

for (const colorScheme of ['light', 'dark'] as const) {
  test.describe(`the API reference in ${colorScheme} mode`, () => {
    test('has no serious or critical accessibility problem', async ({ browser, baseURL }) => {
      const found = await withScripts(
        browser,
        async (page) => {
          await page.emulateMedia({ colorScheme });
          await page.goto(DOCS);
          await expect(page.getByRole('heading', { level: 1 })).toBeVisible();
          return problems(page);
        },
        { baseURL },
      );
      expect(found).toEqual([]);
    });
  });
}

test('the reference is a page of its own: one heading, landmarks, the document linked, no script', async ({
  page,
}) => {
  const response = await page.goto(DOCS);
  expect(response?.status()).toBe(200);
  expect(response?.headers()['content-type']).toBe('text/html; charset=utf-8');
  await expect(page).toHaveTitle(/API reference/);
  await expect(page.getByRole('heading', { level: 1 })).toHaveCount(1);
  await expect(page.getByRole('banner')).toBeVisible();
  await expect(page.getByRole('main')).toBeVisible();
  await expect(page.getByRole('navigation', { name: 'Contents' })).toBeVisible();
  await expect(page.getByRole('link', { name: '/v1/openapi.json' })).toHaveAttribute('href', '/v1/openapi.json');
  await expect(page.locator('script')).toHaveCount(0);
  // The bare address leads here too.
  await page.goto('/v1/docs');
  expect(new URL(page.url()).pathname).toBe(DOCS);
});

test('a link in the contents leads to its operation', async ({ page }) => {
  await page.goto(DOCS);
  const contents = page.getByRole('navigation', { name: 'Contents' });
  const link = contents.getByRole('link', { name: 'POST /v1/code_interpreter/run', exact: true });
  const target = (await link.getAttribute('href')) ?? '';
  expect(target).toMatch(/^#/);
  await link.click();
  expect(new URL(page.url()).hash).toBe(target);
  const operation = page.getByRole('region', { name: 'POST /v1/code_interpreter/run', exact: true });
  await expect(operation).toHaveAttribute('id', target.slice(1));
  await expect(operation.getByRole('heading', { level: 3 })).toBeInViewport();
  // Its parameters, body and an example are there to read.
  await expect(operation.getByRole('heading', { name: 'Request body' })).toBeVisible();
  await expect(operation.getByRole('group', { name: /curl example/ })).toContainText('$RUNCELL_KEY');
});

test('the skip link gives the keyboard to the reference', async ({ page }) => {
  await page.goto(DOCS);
  await page.keyboard.press('Tab');
  const skip = page.getByRole('link', { name: 'Skip to the reference' });
  await expect(skip).toBeFocused();
  await expect(skip).toBeInViewport();
  await page.keyboard.press('Enter');
  await expect(page.getByRole('main')).toBeFocused();
});

test.describe('on a phone', () => {
  test.use({ viewport: PHONE });

  test('the page fits the screen: wide tables and code scroll in boxes of their own', async ({ page, browser, baseURL }) => {
    await page.goto(DOCS);
    await expect(page.getByRole('heading', { level: 1 })).toBeVisible();
    const box = await page.getByRole('main').boundingBox();
    expect((box?.x ?? 0) + (box?.width ?? 0)).toBeLessThanOrEqual(PHONE.width);
    // Measured with scripts on (the measure is a script; the layout does
    // not depend on scripts), and checked by axe-core at this width, where
    // boxes scroll.
    const measured = await withScripts(
      browser,
      async (phone) => {
        await phone.goto(DOCS);
        const sizes = await phone.evaluate(() => ({
          width: document.documentElement.scrollWidth,
          // A box that scrolls can be focused, to scroll it from the keyboard.
          unreachable: [...document.querySelectorAll<HTMLElement>('pre, .table')]
            .filter((box) => box.scrollWidth > box.clientWidth && box.tabIndex < 0)
            .map((box) => box.outerHTML.slice(0, 80)),
          scrolling: [...document.querySelectorAll('.table')].filter((box) => box.scrollWidth > box.clientWidth).length,
        }));
        return { ...sizes, problems: await problems(phone) };
      },
      { baseURL, viewport: PHONE },
    );
    expect(measured.width).toBeLessThanOrEqual(PHONE.width);
    expect(measured.unreachable).toEqual([]);
    // At this width, parameter tables do scroll: the check above is not empty.
    expect(measured.scrolling).toBeGreaterThan(0);
    expect(measured.problems).toEqual([]);
  });
});
