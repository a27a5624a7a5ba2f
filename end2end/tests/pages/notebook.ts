import { expect, type Locator, type Page, type WebSocket } from '@playwright/test';

/** The notebook screen, by role and label. */
export class NotebookPage {
  readonly message: Locator;
  readonly send: Locator;
  readonly connection: Locator;
  readonly conversation: Locator;
  readonly cells: Locator;
  readonly userCells: Locator;
  readonly codeCells: Locator;
  readonly resultCells: Locator;
  readonly explanationCells: Locator;
  readonly stop: Locator;
  readonly problem: Locator;

  constructor(readonly page: Page) {
    this.message = page.getByRole('textbox', { name: 'Message' });
    this.send = page.getByRole('button', { name: 'Send' });
    this.connection = page.getByRole('status', { name: 'Connection' });
    this.conversation = page.getByRole('region', { name: 'Conversation' });
    this.cells = this.conversation.getByRole('article');
    this.userCells = this.conversation.getByRole('article', { name: 'You' });
    this.codeCells = this.conversation.getByRole('article', { name: 'Code' });
    this.resultCells = this.conversation.getByRole('article', { name: 'Result' });
    this.explanationCells = this.conversation.getByRole('article', { name: 'Explanation' });
    this.stop = page.getByRole('button', { name: 'Stop' });
    this.problem = page.getByRole('alert').filter({ hasText: /\S/ });
  }

  /** Opens a new session (`/` makes none; its "New session" post does);
   * returns its address. */
  async openNew(): Promise<string> {
    await this.page.goto('/');
    await this.page.getByRole('button', { name: 'New session' }).click();
    await expect(this.page).toHaveURL(/\/sessions\/[0-9a-f-]{36}$/);
    return this.page.url();
  }

  /** Picks the Browser sandbox and waits for the page's Python (it loads in
   * a few seconds; more on a busy machine). */
  async pickBrowser() {
    await this.page.getByRole('combobox', { name: 'Sandbox' }).selectOption({ label: 'Browser (Pyodide)' });
    const status = this.page.getByRole('status', { name: 'Python in this page' });
    await expect(status).toHaveText('Python ready', { timeout: 60_000 });
  }

  async waitConnected() {
    await expect(this.connection).toHaveText('connected');
  }

  /** Types a message and presses Enter. */
  async ask(text: string) {
    await this.message.fill(text);
    await this.message.press('Enter');
  }

  /** The cells' kinds, in page order. */
  async kinds(): Promise<string[]> {
    return this.cells.evaluateAll((cells) => cells.map((c) => c.getAttribute('aria-label') ?? ''));
  }

  /** Waits for the turn under way to end (hydrated pages: Stop hides). */
  async waitTurnEnd() {
    await expect(this.stop).toBeHidden({ timeout: 25_000 });
  }

  /** Collects the session socket's event frames as they arrive. */
  recordFrames(): { kinds: string[] } {
    const record = { kinds: [] as string[] };
    this.page.on('websocket', (ws: WebSocket) => {
      ws.on('framereceived', (frame) => {
        const msg = JSON.parse(String(frame.payload));
        if (msg.type === 'event') record.kinds.push(msg.event.kind);
      });
    });
    return record;
  }
}
