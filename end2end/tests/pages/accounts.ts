import { expect, type Locator, type Page, type Route, type TestInfo } from '@playwright/test';

/** The sign-in button's words: `RUNCELL_AUTH__OIDC__NAME` in playwright.config.ts. */
export const PROVIDER = 'Example ID';

/** A provider login of its own for each test, project and attempt (the
 * provider takes any login), so that parallel tests never share a person.
 * Its account's name is the login capitalised. */
export function loginFor(word: string, testInfo: TestInfo): { login: string; name: string } {
  const login = `${word}-${testInfo.project.name}-r${testInfo.retry}`;
  return { login, name: login.charAt(0).toUpperCase() + login.slice(1) };
}

/** The login that is an admin in this project (`RUNCELL_AUTH__ADMINS`): one
 * per project, so that the two never govern as the same person at once. */
export function adminFor(testInfo: TestInfo): { login: string; name: string } {
  return testInfo.project.name === 'no-js' ? { login: 'alice', name: 'Alice' } : { login: 'ada', name: 'Ada' };
}

/** The session page's account group, in the sidebar: who is signed in, or
 * a way to sign in. */
export class AccountMenu {
  readonly group: Locator;
  readonly signIn: Locator;
  readonly signOut: Locator;
  readonly admin: Locator;
  readonly keys: Locator;

  constructor(readonly page: Page) {
    this.group = page.getByRole('group', { name: 'Account' });
    this.signIn = this.group.getByRole('link', { name: 'Sign in' });
    this.signOut = this.group.getByRole('button', { name: 'Sign out' });
    this.admin = this.group.getByRole('link', { name: 'Admin' });
    this.keys = this.group.getByRole('link', { name: 'Your API keys' });
  }

  async expectSignedInAs(name: string) {
    await expect(this.group).toContainText(`Signed in as ${name}`);
    await expect(this.signOut).toBeVisible();
    await expect(this.signIn).toHaveCount(0);
  }

  async expectAnonymous() {
    await expect(this.signIn).toBeVisible();
    await expect(this.group).not.toContainText('Signed in as');
    await expect(this.signOut).toHaveCount(0);
  }
}

/** From runcell's sign-in page: the provider's button, then the provider's
 * own login form (oidc-provider's development page: any login and any
 * password), back to runcell signed in, at `back` (where the sign-in page
 * was asked to return to; `/` when it was not). */
export async function signInAtProvider(page: Page, login: string, back = '/') {
  // The provider's page imports a web font from the internet: the test
  // answers it with nothing (this machine has no outside network, and a
  // test reaches nothing outside anyway).
  const outside = (url: URL) => url.hostname !== '127.0.0.1';
  const nothing = (route: Route) => route.fulfill({ status: 200, contentType: 'text/css', body: '' });
  await page.route(outside, nothing);
  await page.getByRole('link', { name: `Sign in with ${PROVIDER}` }).click();
  await page.getByRole('textbox', { name: 'Enter any login' }).fill(login);
  await page.getByPlaceholder('and password').fill('any password');
  await page.getByRole('button', { name: 'Sign-in' }).click();
  await expect(page).toHaveURL(back);
  await page.unroute(outside, nothing);
}

/** Presses Tab until `target` has the focus, as a keyboard user reaches it
 * (at most `limit` presses). Asked through Playwright's own checks, not a
 * script in the page: it works with scripts off. */
export async function tabTo(page: Page, target: Locator, limit = 40) {
  for (let i = 0; i < limit; i++) {
    try {
      await expect(target).toBeFocused({ timeout: 100 });
      return;
    } catch {
      await page.keyboard.press('Tab');
    }
  }
  await expect(target, `reached with at most ${limit} presses of Tab`).toBeFocused({ timeout: 100 });
}
