import type { Page } from '@playwright/test';
import { test, expect } from './fixtures';
import { NotebookPage } from './pages/notebook';
import { AccountMenu, adminFor, loginFor, signInAtProvider, tabTo } from './pages/accounts';
import { problems } from './axe';

// Signing in with the organisation's OpenID provider (oidc/provider.mjs,
// started beside runcell by playwright.config.ts), and the pages a signed-in
// person and an admin use. Each is plain links and forms: every test runs
// with JavaScript off and on.

const fenced = (code: string) => '```python\n' + code + '\n```';

/** Asks a question in the session open in `page` (through the API with the
 * page's own cookie, so that it works with JavaScript off too). */
async function ask(page: Page, code: string) {
  const id = page.url().split('/').pop() ?? '';
  const response = await page.request.post(`/api/sessions/${id}/ask`, { data: { text: fenced(code) } });
  expect(response.status()).toBe(200);
  expect(await response.text()).toContain('turn_finished');
  await page.reload();
}

/** Signs `login` in from a new session page's sidebar, and opens a new
 * session as them; returns the first session's address. */
async function signIn(page: Page, login: string): Promise<string> {
  const first = await new NotebookPage(page).openNew();
  await new AccountMenu(page).signIn.click();
  // The sign-in page brings them back to the page they left.
  await expect(page).toHaveURL(/\/login\?next=\/sessions\//);
  await signInAtProvider(page, login, new URL(first, page.url()).pathname);
  return first;
}

/** No serious or critical accessibility problem on the page, by axe-core.
 * It runs as a script in the page, which it cannot with scripts off: these
 * pages are the same server-rendered HTML either way, checked once, in the
 * hydrated project. */
async function expectAccessible(page: Page, javaScriptEnabled: boolean) {
  if (javaScriptEnabled) expect(await problems(page)).toEqual([]);
}

/** Drops the browser's own reports of the `status` documents a test
 * expects (a 403 page is still a page the browser reports). */
function expectStatusReports(pageErrors: string[], status: number, count: number) {
  const expected = pageErrors.filter((e) => e.includes(`status of ${status} `));
  expect(expected).toHaveLength(count);
  pageErrors.splice(0, pageErrors.length, ...pageErrors.filter((e) => !expected.includes(e)));
}

test('a person signs in on the provider’s own page, is named in the sidebar, and signs out', async ({ page }, testInfo) => {
  const { login, name } = loginFor('bob', testInfo);
  const account = new AccountMenu(page);
  const notebook = new NotebookPage(page);
  await notebook.openNew();
  await account.expectAnonymous();

  const left = new URL(page.url()).pathname;
  await account.signIn.click();
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('runcell');
  await signInAtProvider(page, login, left);
  await notebook.openNew();
  await account.expectSignedInAs(name);
  await expect(account.keys).toBeVisible();
  // A member: no way to the admin page.
  await expect(account.admin).toHaveCount(0);

  await account.signOut.click();
  await expect(page).toHaveURL('/');
  await notebook.openNew();
  await account.expectAnonymous();
});

test('what a visitor asked before signing in is theirs after it, and not the browser’s after signing out', async ({ page }, testInfo) => {
  const { login, name } = loginFor('carol', testInfo);
  const notebook = new NotebookPage(page);
  const account = new AccountMenu(page);
  await notebook.openNew();
  await ask(page, "print('asked before signing in')");
  const asked = page.url();
  const id = asked.split('/').pop() ?? '';
  const entry = (p: Page) =>
    p.getByRole('navigation', { name: 'Sessions' }).getByRole('link', { name: /asked before signing in/ });

  await account.signIn.click();
  // Back on the page they asked on, now theirs.
  await signInAtProvider(page, login, `/sessions/${id}`);
  await account.expectSignedInAs(name);
  await notebook.openNew();
  await account.expectSignedInAs(name);
  await expect(entry(page)).toHaveAttribute('href', `/sessions/${id}`);
  await entry(page).click();
  await expect(page).toHaveURL(asked);
  await expect(notebook.resultCells.first()).toContainText('asked before signing in');

  // Signed out, the browser is a new visitor: the session went with the person.
  await account.signOut.click();
  await notebook.openNew();
  await account.expectAnonymous();
  await expect(entry(page)).toHaveCount(0);
});

test('a member is refused the admin page', async ({ page, pageErrors }, testInfo) => {
  const { login } = loginFor('dave', testInfo);
  await signIn(page, login);
  const response = await page.goto('/admin');
  expect(response?.status()).toBe(403);
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('Admins only');
  await expect(page.getByRole('alert')).toHaveText('This page is for the admins of this runcell.');
  expectStatusReports(pageErrors, 403, 1);
});

test('an admin changes a person’s role and limits by keyboard; the admin pages pass axe', async ({ page, browser, javaScriptEnabled }, testInfo) => {
  // The person, signed in once in a browser of their own, so that they have
  // an account.
  const member = loginFor('erin', testInfo);
  const theirs = await browser.newContext();
  try {
    await signIn(await theirs.newPage(), member.login);
  } finally {
    await theirs.close();
  }

  const admin = adminFor(testInfo);
  await signIn(page, admin.login);
  await new NotebookPage(page).openNew();
  const account = new AccountMenu(page);
  await account.expectSignedInAs(admin.name);
  await account.admin.click();

  await expect(page).toHaveURL('/admin');
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('Admin');
  const people = page.getByRole('table', { name: /Everyone who has signed in/ });
  const row = people.getByRole('row').filter({ hasText: `${member.login}@example.test` });
  // Its cells: email, role, status...
  const roleCell = row.getByRole('cell').nth(1);
  await expect(roleCell).toHaveText('member');
  await expectAccessible(page, javaScriptEnabled);

  // To their page by keyboard.
  const link = row.getByRole('link', { name: member.name });
  await tabTo(page, link);
  await page.keyboard.press('Enter');
  await expect(page.getByRole('heading', { level: 1 })).toHaveText(member.name);
  const userPage = page.url();
  await expectAccessible(page, javaScriptEnabled);

  // The role: the select reached by Tab, changed with an arrow key, sent
  // with the button after it.
  const role = page.getByRole('combobox', { name: 'Role' });
  await expect(role).toHaveValue('member');
  await tabTo(page, role);
  await page.keyboard.press('ArrowDown');
  await expect(role).toHaveValue('admin');
  await page.keyboard.press('Tab');
  await expect(page.getByRole('button', { name: 'Change role' })).toBeFocused();
  await page.keyboard.press('Enter');
  await expect(page).toHaveURL(userPage);
  await expect(role).toHaveValue('admin');

  // A limit: typed, and sent with Enter from the field.
  const kernels = page.getByRole('spinbutton', { name: 'Live kernels at once' });
  await expect(kernels).toHaveValue('');
  await tabTo(page, kernels);
  await page.keyboard.type('2');
  await page.keyboard.press('Enter');
  await expect(page).toHaveURL(userPage);
  await expect(kernels).toHaveValue('2');
  await expectAccessible(page, javaScriptEnabled);

  // Both changes are in the table and the audit log.
  await page.goto('/admin');
  await expect(roleCell).toHaveText('admin');
  const log = page.getByRole('table', { name: /Sign-ins, key changes and admin actions/ });
  await expect(log).toContainText(`${admin.name} made ${member.name} an admin`);
  await expect(log).toContainText(`${admin.name} set ${member.name}'s limits`);
  await expectAccessible(page, javaScriptEnabled);
});

test('a person makes and revokes an API key by keyboard on their account page, which passes axe', async ({ page, javaScriptEnabled }, testInfo) => {
  const { login, name } = loginFor('frank', testInfo);
  await signIn(page, login);
  await new NotebookPage(page).openNew();
  await new AccountMenu(page).keys.click();

  await expect(page).toHaveURL('/account');
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('Your account');
  await expect(page.getByText(`${login}@example.test`)).toBeVisible();
  await expect(page.getByText(name, { exact: true })).toBeVisible();
  await expect(page.getByText('You have no API keys yet.')).toBeVisible();
  await expectAccessible(page, javaScriptEnabled);

  const keyName = page.getByRole('textbox', { name: 'Name of a new key' });
  await tabTo(page, keyName);
  await page.keyboard.type('laptop');
  await page.keyboard.press('Enter');
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('New API key');
  await expect(page.getByRole('status')).toContainText('shown this once');
  await expect(page.locator('pre code')).toHaveText(/^rc_/);
  await expectAccessible(page, javaScriptEnabled);

  await page.getByRole('link', { name: 'Back to your account' }).click();
  const keys = page.getByRole('table', { name: 'Your API keys, oldest first' });
  const laptop = keys.getByRole('row').filter({ hasText: 'laptop' });
  await expect(laptop).toContainText('live');
  await expectAccessible(page, javaScriptEnabled);
  const revoke = laptop.getByRole('button', { name: 'Revoke the key laptop' });
  await tabTo(page, revoke);
  await page.keyboard.press('Enter');
  await expect(page).toHaveURL('/account');
  await expect(laptop).toContainText('revoked');
  await expect(revoke).toHaveCount(0);
});
