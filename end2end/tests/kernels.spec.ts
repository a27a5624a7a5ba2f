import type { Page } from '@playwright/test';
import { test, expect } from './fixtures';
import { problems } from './axe';
import { NotebookPage } from './pages/notebook';

// A person on their own machine (anonymous, from loopback: the server here
// listens on 127.0.0.1, a single-person install by default) opens notebook
// after notebook. Each run holds a kernel; the fifth and sixth notebooks
// still run, taking the longest-idle kernel's place, and the sessions list
// shows which notebooks hold one, with a Close button each.

const fenced = (code: string) => '```python\n' + code + '\n```';

async function notebookThatRan(page: Page, n: number): Promise<string> {
  const notebook = new NotebookPage(page);
  const url = await notebook.openNew();
  const id = url.split('/').pop() ?? '';
  const response = await page.request.post(`/api/sessions/${id}/ask`, {
    data: { text: fenced(`kept = ${n}\nprint('notebook ${n} ran')`) },
  });
  expect(response.status()).toBe(200);
  const events = await response.text();
  expect(events).toContain(`notebook ${n} ran`);
  expect(events).not.toContain('SandboxError');
  return id;
}

test('six notebooks in a row all run, and the sessions list closes a kernel', async ({ page, javaScriptEnabled }) => {
  test.setTimeout(120_000);
  const ids: string[] = [];
  for (let n = 0; n < 6; n++) ids.push(await notebookThatRan(page, n));
  test.skip(!javaScriptEnabled, 'the list of kernels is asked for by the live page');

  await page.goto(`/sessions/${ids[5]}`);
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  const sidebar = page.locator('details.sidebar');
  if (!(await sidebar.evaluate((d: HTMLDetailsElement) => d.open))) {
    // On a narrow screen the list is a drawer.
    if (!(await page.getByRole('region', { name: /Kernels in use/ }).isVisible())) {
      await sidebar.locator('summary').first().click();
    }
  }
  const kernels = page.getByRole('region', { name: /Kernels in use/ });
  await expect(kernels.getByRole('heading')).toHaveText('Kernels in use (4 of 4)');
  const entries = kernels.getByRole('listitem');
  await expect(entries).toHaveCount(4);
  await expect(entries.first()).toContainText('This notebook');
  await expect(entries.first()).toContainText(/Local sandbox · idle/);
  // The first two notebooks' kernels made room for the fifth and sixth.
  for (const gone of ids.slice(0, 2)) {
    await expect(kernels.locator(`a[href="/sessions/${gone}"]`)).toHaveCount(0);
  }

  const third = entries.filter({ has: page.locator(`a[href="/sessions/${ids[2]}"]`) });
  await third.getByRole('button', { name: /^Close the kernel of/ }).click();
  await expect(kernels.getByRole('status')).toContainText('Closed the kernel of');
  await expect(kernels.getByRole('heading')).toHaveText('Kernels in use (3 of 4)');
  await expect(kernels.locator(`a[href="/sessions/${ids[2]}"]`)).toHaveCount(0);
  expect(await problems(page)).toEqual([]);

  // Its next run starts a new kernel and says the variables are gone.
  const again = await page.request.post(`/api/sessions/${ids[2]}/ask`, {
    data: { text: fenced("print('kept' in globals())") },
  });
  const text = await again.text();
  expect(text).toContain('kernel had stopped');
  expect(text).toContain('False');

  // That kernel started from elsewhere (another tab would do the same):
  // this page's list learns of it when the person comes back to the tab,
  // without a turn here.
  await expect(kernels.getByRole('heading')).toHaveText('Kernels in use (3 of 4)');
  await page.evaluate(() => window.dispatchEvent(new Event('focus')));
  await expect(kernels.getByRole('heading')).toHaveText('Kernels in use (4 of 4)');
  await expect(kernels.locator(`a[href="/sessions/${ids[2]}"]`)).toHaveCount(1);
});

test('on a phone the kernels list is in the sessions drawer, its buttons large enough to touch', async ({ page, javaScriptEnabled }) => {
  test.skip(!javaScriptEnabled, 'the list of kernels is asked for by the live page');
  await page.setViewportSize({ width: 390, height: 844 });
  const id = await notebookThatRan(page, 0);
  await page.goto(`/sessions/${id}`);
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  await page.locator('details.sidebar > summary').click();
  const kernels = page.getByRole('region', { name: /Kernels in use/ });
  await expect(kernels.getByRole('heading')).toHaveText('Kernels in use (1 of 4)');
  const close = kernels.getByRole('button', { name: /^Close the kernel of/ });
  await close.scrollIntoViewIfNeeded();
  const box = await close.boundingBox();
  expect(box?.width ?? 0).toBeGreaterThanOrEqual(44);
  expect(box?.height ?? 0).toBeGreaterThanOrEqual(44);
  expect((box?.x ?? 0) + (box?.width ?? 0)).toBeLessThanOrEqual(390);
  expect(await problems(page)).toEqual([]);
  // In the drawer, above its backdrop: a tap reaches the button.
  await close.click();
  await expect(kernels.getByRole('status')).toContainText('Closed the kernel of');
});
