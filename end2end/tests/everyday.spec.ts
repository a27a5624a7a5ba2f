import { test, expect } from './fixtures';
import { NotebookPage } from './pages/notebook';

// Issue 41: the notebook in everyday use: always saying what it is doing,
// following the output, stopping what was queued, colours in every stream,
// truthful about attempts and charts.

const fenced = (code: string) => '```python\n' + code + '\n```';

const hydratedOnly = (name: string) => test.skip(name === 'no-js', 'a live page needs scripts');

/** How far the view is from the page's end, in CSS pixels. */
const distanceToBottom = (notebook: NotebookPage) =>
  notebook.page.evaluate(() => document.body.scrollHeight - (window.scrollY + window.innerHeight));

test.describe('the first screen', () => {
  test('offers questions to start with, one with a sample file, and says what runs where', async ({ page }, info) => {
    await page.goto('/');
    // The server's words stay once the page has come to life.
    if (info.project.name !== 'no-js') await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
    await expect(page.locator('.what-runs-where')).toHaveText(/Answers: scripted\. Code runs in a sandbox on this server, without network\./);
    const suggestions = page.getByRole('region', { name: 'Or try one of these' }).getByRole('button');
    await expect(suggestions).toHaveCount(4);
    await suggestions.filter({ hasText: 'Analyse a sample file' }).click();
    await expect(page).toHaveURL(/\/sessions\/[0-9a-f-]{36}$/);
    await expect(new NotebookPage(page).userCells.first()).toContainText('In sales.csv, which region sold the most');
    const id = page.url().split('/').pop();
    const files = await (await page.request.get(`/api/sessions/${id}/files`)).json();
    expect(JSON.stringify(files)).toContain('sales.csv');
  });
});

test.describe('the theme switch', () => {
  test('picks light or dark over the system theme, and keeps it', async ({ page }) => {
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.goto('/');
    const html = page.locator('html');
    const background = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    const darkBackground = await background();
    const toggle = page.getByRole('button', { name: /^Theme:/ });
    await expect(toggle).toHaveText('Theme: system');
    await toggle.click();
    await expect(html).toHaveAttribute('data-theme', 'light');
    await expect(page.getByRole('button', { name: /^Theme:/ })).toHaveText('Theme: light');
    // Read once the new page's styles apply (without scripts the switch is
    // a form: the page reloads, and is transparent until its CSS is in).
    await expect.poll(background).not.toBe(darkBackground);
    await expect.poll(background).not.toBe('rgba(0, 0, 0, 0)');
    // Kept for the next page, rendered so by the server (no flash).
    await page.reload();
    await expect(html).toHaveAttribute('data-theme', 'light');
    await page.getByRole('button', { name: /^Theme:/ }).click();
    await expect(html).toHaveAttribute('data-theme', 'dark');
    await page.getByRole('button', { name: /^Theme:/ }).click();
    await expect(html).toHaveAttribute('data-theme', 'auto');
    await expect.poll(background).toBe(darkBackground);
  });
});

test.describe('the sessions list', () => {
  // Fourteen hours ahead of UTC: for most of a UTC day, another day.
  test.use({ timezoneId: 'Pacific/Kiritimati' });

  test('shows each session\'s day, in the reader\'s time zone once live, and finds sessions by title', async ({ page }, info) => {
    const notebook = new NotebookPage(page);
    for (const title of ['Rainfall by month', 'Strawberry letters']) {
      const url = await notebook.openNew();
      const id = url.split('/').pop() ?? '';
      await page.request.post(`/api/sessions/${id}/ask`, { data: { text: fenced('print(1)') } });
      expect((await page.request.patch(`/api/sessions/${id}`, { data: { title } })).status()).toBe(200);
    }
    await page.reload();
    const list = page.getByRole('navigation', { name: 'Sessions' });
    const utcToday = new Date().toISOString().slice(0, 10);
    if (info.project.name === 'no-js') {
      // Without scripts, the server's day: in UTC.
      await expect(list.locator('time.session-date').first()).toHaveAttribute('datetime', utcToday);
      return;
    }
    const localToday = await page.evaluate(() => {
      const d = new Date();
      const two = (n: number) => String(n).padStart(2, '0');
      return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())}`;
    });
    await expect(list.locator('time.session-date').first()).toHaveAttribute('datetime', localToday);
    await expect(list.locator('time.session-date').first()).toHaveText(localToday);
    await list.getByRole('searchbox', { name: 'Search sessions' }).fill('rain');
    await expect(list.locator('.session-entry > a')).toHaveText(['Rainfall by month']);
  });
});

test.describe('math', () => {
  test('math in an explanation is MathML, also without scripts', async ({ page }) => {
    const notebook = new NotebookPage(page);
    const url = await notebook.openNew();
    const id = url.split('/').pop() ?? '';
    // The scripted model's explanation quotes the output, formula and all.
    const asked = await page.request.post(`/api/sessions/${id}/ask`, {
      data: { text: fenced('print(r"$\\frac{a}{b} + x^2$ costs $5-$10")') },
    });
    expect(asked.status()).toBe(200);
    await page.reload();
    const explanation = notebook.explanationCells.last();
    const formula = explanation.locator('math');
    await expect(formula).toHaveCount(1);
    await expect(formula.locator('mfrac')).toHaveCount(1);
    await expect(formula.locator('msup')).toHaveCount(1);
    // Money stays money.
    await expect(explanation).toContainText('costs $5-$10');
  });
});

test.describe('everyday use', () => {
  test('from Enter on, the turn says what it is doing', async ({ page }, info) => {
    hydratedOnly(info.project.name);
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    // Every state the page passes through is recorded as it happens, so that
    // a busy machine cannot miss the wait for the first piece (half a second
    // in the slow script): the phase, its words, how many code cells there
    // are, and what the announcer says.
    await page.evaluate(() => {
      const seen: unknown[] = [];
      (window as unknown as { seenPhases: unknown[] }).seenPhases = seen;
      const look = () => {
        const shown = document.querySelector('[aria-label="Conversation"] .turn-phase');
        const said = document.querySelector('p[role="status"][aria-live="polite"]');
        const code = document.querySelectorAll('[aria-label="Conversation"] article[aria-label="Code"]');
        const label = shown?.querySelector('.turn-phase-label')?.textContent;
        const now = shown ? [shown.getAttribute('data-phase'), label, code.length, said?.textContent] : null;
        if (JSON.stringify(now) !== JSON.stringify(seen[seen.length - 1])) seen.push(now);
      };
      new MutationObserver(look).observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
    });
    await notebook.ask('#scripted: slow\n' + fenced('print(6 * 7)'));
    const phase = page.locator('.turn-phase');
    // It waits, inside the conversation, before any code cell, and the
    // announcer says the same.
    await expect
      .poll(() => page.evaluate(() => (window as unknown as { seenPhases: unknown[] }).seenPhases))
      .toContainEqual(['waiting', 'Waiting for the model…', 0, 'Waiting for the model…']);
    const announcer = page.locator('p[role="status"][aria-live="polite"]');
    // The seconds count while it waits.
    await expect(phase.locator('.turn-phase-time')).toHaveText(/· [1-9]\d* s/, { timeout: 5_000 });
    // Then it moves on, and is gone when the turn ends.
    await expect(phase).toHaveAttribute('data-phase', /writing-code|starting|running|reading-output|explaining/, { timeout: 20_000 });
    await notebook.waitTurnEnd();
    await expect(phase).toHaveCount(0);
    await expect(announcer).toHaveText('The answer is ready.');
  });

  test('Stop takes the queued messages back into the box instead of sending them', async ({ page }, info) => {
    hydratedOnly(info.project.name);
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.ask('#scripted: slow\n' + fenced('print(1)'));
    await expect(notebook.stop).toBeVisible();
    await notebook.ask('second question');
    await expect(page.getByRole('list', { name: 'Queued messages' })).toContainText('second question');
    await notebook.stop.click();
    await notebook.waitTurnEnd();
    await expect(page.getByRole('list', { name: 'Queued messages' })).toHaveCount(0);
    await expect(notebook.message).toHaveValue('second question');
    // Nothing was sent in its place.
    await page.waitForTimeout(1_000);
    await expect(notebook.userCells).toHaveCount(1);
  });

  test('colours printed to stdout are drawn, not shown as escape codes', async ({ page }, info) => {
    hydratedOnly(info.project.name);
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.ask(fenced("print('\\033[31mred\\033[0m and plain')"));
    await notebook.waitTurnEnd();
    const out = notebook.resultCells.first().locator('.out-stdout');
    await expect(out.locator('span.ansi-red')).toHaveText('red');
    await expect(out).toHaveText('red and plain\n');
    await expect(out).not.toContainText('[31m');
  });

  test('a question that asks for a chart is answered by a Plotly chart alone', async ({ page }, info) => {
    hydratedOnly(info.project.name);
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    // Plotly sums per bar itself: no groupby is needed, and no fix is asked.
    await notebook.ask(
      'Plot the values per group\n' +
        fenced(
          [
            'import pandas as pd, plotly.express as px',
            "df = pd.DataFrame({'g': ['a', 'b', 'a'], 'v': [1, 2, 3]})",
            "px.bar(df, x='g', y='v').show()",
          ].join('\n'),
        ),
    );
    await notebook.waitTurnEnd();
    await expect(notebook.codeCells).toHaveCount(1);
    await expect(notebook.resultCells.first().locator('figure.out-chart')).toHaveCount(1);
    await expect(notebook.explanationCells.last()).toContainText('interactive chart');
  });

  test('the view follows an image turn, lets the reader scroll away, and jumps back', async ({ page }, info) => {
    hydratedOnly(info.project.name);
    await page.setViewportSize({ width: 1000, height: 700 });
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    const chart = fenced(
      ['import matplotlib.pyplot as plt', 'plt.figure(figsize=(6, 6))', 'plt.plot([1, 2, 3], [3, 1, 2])', 'plt.title("A tall one")', 'plt.show()'].join('\n'),
    );
    await notebook.ask('Draw a chart\n' + chart);
    await notebook.waitTurnEnd();
    await expect(notebook.resultCells.first().locator('img')).toBeVisible();
    // The figure's size came with it (read from the PNG's header), so its
    // room was kept before it loaded: 6 × 6 inches at matplotlib's 100 dpi.
    await expect(notebook.resultCells.first().locator('img')).toHaveAttribute('width', /^[1-9]\d+$/);
    await expect(notebook.resultCells.first().locator('img')).toHaveAttribute('height', /^[1-9]\d+$/);
    // After the image loaded (late, after its cell), the end is in view.
    await expect.poll(() => distanceToBottom(notebook)).toBeLessThan(100);
    await notebook.ask('Draw it again\n' + chart);
    await notebook.waitTurnEnd();
    await expect(notebook.resultCells.nth(1).locator('img')).toBeVisible();
    await expect.poll(() => distanceToBottom(notebook)).toBeLessThan(100);

    // The reader scrolls up: following stops and "Jump to latest" shows.
    const jump = page.getByRole('button', { name: /Jump to latest/ });
    await expect(jump).toBeHidden();
    await page.mouse.wheel(0, -1500);
    await expect(jump).toBeVisible();
    const away = await distanceToBottom(notebook);
    expect(away).toBeGreaterThan(300);
    // A turn asked elsewhere (the API) arrives: the view stays, the button counts it.
    const id = page.url().split('/').pop();
    const asked = await page.request.post(`/api/sessions/${id}/ask`, { data: { text: fenced('print(1)') } });
    expect(asked.status()).toBe(200);
    await expect(jump).toHaveText(/Jump to latest \(\d+ new cells?\)/);
    expect(await distanceToBottom(notebook)).toBeGreaterThan(300);
    await jump.click();
    await expect.poll(() => distanceToBottom(notebook)).toBeLessThan(100);
    await expect(jump).toBeHidden();

    // Scrolled away again, sending brings the question into view.
    await page.mouse.wheel(0, -1500);
    await expect(jump).toBeVisible();
    await notebook.ask(fenced('print("the latest")'));
    await expect(notebook.userCells.last()).toBeInViewport();
    await notebook.waitTurnEnd();
    await expect.poll(() => distanceToBottom(notebook)).toBeLessThan(100);
  });
});
