import { test as base, expect, type Response } from '@playwright/test';

/** What a page's document response said, to explain a refused script. */
async function describeDocument(response: Response): Promise<string> {
  const headers = response.headers();
  const policy = headers['content-security-policy'] ?? '(none)';
  const headerNonce = /'nonce-([^']+)'/.exec(policy)?.[1] ?? '(none)';
  let bodyNonce = '(body unavailable)';
  try {
    const body = await response.text();
    bodyNonce = /<script[^>]*\snonce="([^"]*)"/.exec(body)?.[1] ?? '(no nonce in the body)';
  } catch {
    // The page moved on: its body is gone.
  }
  return `${response.status()} ${response.url()} header nonce ${headerNonce}, body nonce ${bodyNonce}, ` +
    `from service worker ${response.fromServiceWorker()}, date ${headers['date'] ?? '?'}`;
}

/**
 * Every test fails if its page logs an error or throws: hydration mismatches
 * and panics in the wasm bundle show up there first. A script refused by the
 * page's policy also says what the page's document responses carried (the
 * nonce in the header and in the body), to find where a rare one without
 * its nonce comes from.
 */
export const test = base.extend<{ pageErrors: string[] }>({
  pageErrors: [
    async ({ page }, use) => {
      const errors: string[] = [];
      const documents: Response[] = [];
      page.on('pageerror', (error) => errors.push(`uncaught: ${error.message}`));
      page.on('console', (message) => {
        if (message.type() === 'error') errors.push(`console: ${message.text()}`);
      });
      page.on('response', (response) => {
        if (response.request().resourceType() === 'document' && response.request().frame() === page.mainFrame()) {
          documents.push(response);
        }
      });
      await use(errors);
      if (errors.some((e) => e.includes('Content Security Policy'))) {
        for (const response of documents.slice(-3)) errors.push(`document: ${await describeDocument(response)}`);
      }
      expect(errors, 'errors in the page').toEqual([]);
    },
    { auto: true },
  ],
});

export { expect };
