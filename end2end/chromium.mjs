// What the scripts beside the specs share (screenshots.mjs, page-load.mjs):
// Debian's Chromium with the flags it needs here, and a new session made as
// a person makes one.
import { chromium } from 'playwright-core';

const args = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export const launch = () => chromium.launch({ executablePath: '/usr/bin/chromium', args });

/** Clicks "New session" on `page` (already on the home page); the new id. */
export async function newSession(page) {
  await page.getByRole('button', { name: 'New session' }).click();
  await page.waitForURL(/\/sessions\//);
  return page.url().split('/').pop();
}
