import type { APIRequestContext } from '@playwright/test';
import { expect, test } from './fixtures';

/**
 * Issue 40, point 1: a session's title is text everywhere. Each payload is
 * set three ways a visitor can set a title (the first question, a rename, an
 * imported notebook's first heading); a stranger then opens the share link
 * and no script of the payload runs. The fixture fails the test on any
 * console error, which is also where a CSP violation (a script of the page
 * itself refused) would show.
 */
const PAYLOADS = [
  '</title><script>eval(decodeURI(location.hash.slice(1)))</script>',
  '</title><img src=x onerror="window.__xss=(window.__xss||0)+1">',
  '"><svg/onload=window.__xss=(window.__xss||0)+1>',
  "</TITLE><script>alert(document.domain)</script>",
];

/** Sets `title` on a new session of `request`'s owner, `how`; its share link. */
async function sessionTitled(request: APIRequestContext, how: string, title: string): Promise<string> {
  let id: string;
  if (how === 'import') {
    const notebook = {
      cells: [
        { cell_type: 'markdown', metadata: {}, source: [`# ${title}`] },
        { cell_type: 'code', metadata: {}, source: ['1 + 1'], outputs: [], execution_count: null },
      ],
      metadata: {},
      nbformat: 4,
      nbformat_minor: 5,
    };
    const imported = await request.post('/api/sessions/import', { data: JSON.stringify(notebook) });
    expect(imported.status()).toBe(201);
    id = (await imported.json()).id;
  } else {
    const made = await request.post('/api/sessions');
    expect(made.status()).toBe(201);
    id = (await made.json()).id;
    if (how === 'question') {
      const asked = await request.post(`/api/sessions/${id}/ask`, { data: { text: title } });
      expect(asked.status()).toBe(200);
      await asked.body();
    } else {
      const renamed = await request.patch(`/api/sessions/${id}`, { data: { title } });
      expect(renamed.status()).toBe(200);
    }
  }
  const shared = await request.post(`/api/sessions/${id}/share`);
  expect(shared.status()).toBe(200);
  return new URL((await shared.json()).url).pathname;
}

for (const how of ['question', 'rename', 'import']) {
  test(`a hostile title set by ${how} runs no script on its share link`, async ({ page, browser }) => {
    // The attacker's own browser makes the sessions.
    const attacker = await browser.newContext();
    const links: string[] = [];
    for (const payload of PAYLOADS) links.push(await sessionTitled(attacker.request, how, payload));
    await attacker.close();

    const dialogs: string[] = [];
    page.on('dialog', async (dialog) => {
      dialogs.push(dialog.message());
      await dialog.dismiss();
    });
    for (const [n, link] of links.entries()) {
      // The hash is what the first payload would eval.
      await page.goto(`${link}#window.__xss=(window.__xss||0)+1`);
      // The session's own heading (an imported heading is one too).
      await expect(page.locator('h1.session-title')).toBeVisible();
      // A moment for an onerror or onload to fire, had markup been made.
      await page.waitForLoadState('load');
      const ran = await page.evaluate(() => (window as unknown as { __xss?: number }).__xss ?? 0);
      expect(ran, `payload ${n} ran`).toBe(0);
      expect(await page.locator('head title').count()).toBe(1);
      const title = await page.title();
      if (how !== 'question') expect(title).toContain(PAYLOADS[n].slice(0, 20));
      expect(await page.locator('script:not([nonce])').count(), 'scripts without the nonce').toBe(0);
      expect(await page.locator('img[src="x"], svg[onload]').count()).toBe(0);
    }
    expect(dialogs).toEqual([]);
  });
}
