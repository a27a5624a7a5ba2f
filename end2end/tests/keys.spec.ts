import { test, expect } from './fixtures';
import { NotebookPage } from './pages/notebook';
import { AccountMenu, loginFor, signInAtProvider } from './pages/accounts';
import { problems } from './axe';

// The account page's API keys: a name outside the rule (a slash) is stopped with the
// rule said, and a new key is copied with its Copy button (a script from
// /account-key.js, the page's only one; without scripts there is no button
// and the key is text to select).

const RULE = 'letters, digits, spaces, . _ and - only, up to 64';

test('a key name with a slash is stopped with the rule said, one with a space is made, and a new key is copied', async ({ page, context, javaScriptEnabled }, testInfo) => {
  const { login } = loginFor('kim', testInfo);
  const first = await new NotebookPage(page).openNew();
  await new AccountMenu(page).signIn.click();
  await signInAtProvider(page, login, new URL(first, page.url()).pathname);
  await new NotebookPage(page).openNew();
  await new AccountMenu(page).keys.click();
  await expect(page).toHaveURL('/account');

  // The field says its rule, beside it and in the browser's own message.
  const name = page.getByRole('textbox', { name: 'Name of a new key' });
  await expect(name).toHaveAccessibleDescription(`${RULE}; e.g. work laptop`);
  await expect(name).toHaveAttribute('title', RULE);
  await name.fill('my/laptop');
  await page.getByRole('button', { name: 'Make a key' }).click();
  await expect(page).toHaveURL('/account');
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('Your account');
  if (javaScriptEnabled) {
    expect(await name.evaluate((input: HTMLInputElement) => input.validity.patternMismatch)).toBe(true);
  }

  await name.fill('work laptop');
  await page.getByRole('button', { name: 'Make a key' }).click();
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('New API key');
  const key = page.locator('#new-key');
  await expect(key).toHaveText(/^rc_\S+$/);
  const copy = page.getByRole('button', { name: 'Copy the key' });
  const status = page.getByRole('status');
  await expect(status).toContainText('shown this once');
  if (!javaScriptEnabled) {
    // No script: no button that would do nothing.
    await expect(copy).toBeHidden();
    return;
  }
  await context.grantPermissions(['clipboard-read', 'clipboard-write']);
  await copy.click();
  await expect(status).toHaveText(/^Copied\. Copy it now/);
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  expect(copied).toBe((await key.textContent())?.trim());
  expect(await problems(page)).toEqual([]);
});
