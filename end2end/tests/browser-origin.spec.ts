import { expect, test } from './fixtures';
import { NotebookPage } from './pages/notebook';

/** A message whose fenced block the scripted model runs as written. */
const fenced = (code: string) => '```python\n' + code + '\n```';

/**
 * What a program in the Browser sandbox tries against the user who runs it:
 * read their sessions, delete one, read their cookie, open their session's
 * socket. Each attempt prints one line: `NAME: blocked (why)` or
 * `NAME: LEAKED (what)`.
 */
function attack(origin: string, session: string, victim: string): string {
  const ws = origin.replace(/^http/, 'ws');
  return `import asyncio, js
from pyodide.ffi import to_js, create_proxy

def opts(**kw):
    return to_js(kw, dict_converter=js.Object.fromEntries)

async def attempt(name, action):
    try:
        print(f"{name}: LEAKED ({await action()})")
    except Exception as e:
        print(f"{name}: blocked ({type(e).__name__}: {str(e)[:60]})")

async def read_list():
    r = await js.fetch("${origin}/api/sessions", opts(credentials="include"))
    return f"{r.status} {(await r.text())[:80]}"

async def delete_one():
    r = await js.fetch("${origin}/api/sessions/${victim}", opts(method="DELETE", credentials="include"))
    return f"{r.status}"

async def delete_by_form():
    r = await js.fetch("${origin}/sessions/${victim}/delete", opts(method="POST", mode="no-cors", credentials="include"))
    return f"{r.type} {r.status}"

async def cookie():
    for where in ("document", "cookieStore"):
        if hasattr(js, where):
            return f"{where} is there"
    return str(js.eval("document.cookie"))

async def socket():
    done = asyncio.get_event_loop().create_future()
    s = js.WebSocket.new("${ws}/ws/sessions/${session}", "runcell.v1")
    keep = [create_proxy(lambda e: done.done() or done.set_result("open")),
            create_proxy(lambda e: done.done() or done.set_exception(ConnectionError(f"closed {e.code}")))]
    s.onopen, s.onclose = keep
    return await asyncio.wait_for(done, 10)

await attempt("list", read_list)
await attempt("delete", delete_one)
await attempt("form", delete_by_form)
await attempt("cookie", cookie)
await attempt("socket", socket)
print("origin:", js.self.origin)`;
}

test.describe("the Browser sandbox's Python holds none of the user's credentials", () => {
  test.skip(({ javaScriptEnabled }) => !javaScriptEnabled, "Python in the page needs the page's scripts");
  // Pyodide loads in a few seconds; more on a busy machine.
  test.setTimeout(120_000);

  test('it runs in an isolated frame with an opaque origin', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.pickBrowser();
    const frame = page.frames().find((f) => new URL(f.url()).pathname === '/py-frame.html');
    expect(frame, 'the page frames its Python').toBeDefined();
    expect(await frame!.evaluate(() => [self.origin, self.crossOriginIsolated, typeof SharedArrayBuffer])).toEqual([
      'null',
      true,
      'function',
    ]);
    // The page itself is isolated too (the frame could not be otherwise).
    expect(await page.evaluate(() => self.crossOriginIsolated)).toBe(true);
  });

  test("a program cannot read, delete or reach the user's sessions", async ({ page }) => {
    const notebook = new NotebookPage(page);
    const url = await notebook.openNew();
    const session = new URL(url).pathname.split('/').pop()!;
    // Another session of the same user, which the program tries to delete.
    const made = await page.request.post('/api/sessions');
    expect(made.status()).toBe(201);
    const victim = (await made.json()).id as string;
    // Listed once it has a turn.
    const asked = await page.request.post(`/api/sessions/${victim}/ask`, { data: { text: 'keep me' } });
    expect(asked.status()).toBe(200);
    const listed = async () =>
      ((await (await page.request.get('/api/sessions')).json()).sessions as { id: string }[]).map((s) => s.id).sort();
    const before = await listed();
    expect(before).toContain(victim);

    await notebook.waitConnected();
    await notebook.pickBrowser();
    await notebook.ask(fenced(attack(new URL(url).origin, session, victim)));
    const out = notebook.resultCells.nth(0).locator('.out-stdout');
    await expect(out).toContainText('origin: null', { timeout: 30_000 });
    const text = await out.innerText();
    for (const name of ['list', 'delete', 'form', 'cookie', 'socket']) {
      expect(text, text).toMatch(new RegExp(`^${name}: blocked`, 'm'));
    }
    expect(text).not.toContain('LEAKED');
    console.log(text);
    await notebook.waitTurnEnd();
    // Nothing was deleted: the user's sessions are all still there (this
    // one has joined them, with its turn).
    const after = await listed();
    expect(after).toContain(victim);
    expect(after).toEqual(expect.arrayContaining(before));
    expect(after).toContain(session);
  });

  test('Stop still interrupts a program at once, through the frame', async ({ page }) => {
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.pickBrowser();
    await notebook.ask(fenced('n = 0\nprint("looping")\nwhile True:\n    n += 1'));
    const result = notebook.resultCells.nth(0);
    await expect(result.locator('.out-stdout')).toHaveText('looping\n');
    const clicked = Date.now();
    await notebook.stop.click();
    await expect(result).toHaveAttribute('data-status', 'cancelled', { timeout: 1_000 });
    const latency = Date.now() - clicked;
    test.info().annotations.push({ type: 'stop latency', description: `${latency} ms` });
    console.log(`Stop → cancelled cell: ${latency} ms`);
    await notebook.waitTurnEnd();
    // Interrupted, not ended: the same Python goes on.
    await expect(result).not.toContainText('was ended');
    await notebook.ask(fenced('print("counted", n > 0)'));
    await expect(notebook.resultCells.nth(1).locator('.out-stdout')).toHaveText('counted True\n');
    await notebook.waitTurnEnd();
  });

  test('without shared memory in the frame, Stop ends its Python and a new one answers', async ({ page }) => {
    // The frame as it would be where the browser does not isolate it.
    await page.context().route('**/py-frame.js', async (route) => {
      const real = await route.fetch();
      const body = (await real.text()).replace('self.crossOriginIsolated &&', 'false &&');
      await route.fulfill({ response: real, body });
    });
    const notebook = new NotebookPage(page);
    await notebook.openNew();
    await notebook.waitConnected();
    await notebook.pickBrowser();
    await notebook.ask(fenced('n = 0\nprint("looping")\nwhile True:\n    n += 1'));
    const result = notebook.resultCells.nth(0);
    await expect(result.locator('.out-stdout')).toHaveText('looping\n');
    await notebook.stop.click();
    await expect(result).toHaveAttribute('data-status', 'cancelled', { timeout: 5_000 });
    await expect(result).toContainText('cannot be interrupted');
    await notebook.waitTurnEnd();
    // A new Python answers the next ask.
    await expect(page.getByRole('status', { name: 'Python in this page' })).toHaveText('Python ready', { timeout: 60_000 });
    await notebook.ask(fenced('print("n" in globals())'));
    await expect(notebook.resultCells.nth(1).locator('.out-stdout')).toHaveText('False\n');
    await notebook.waitTurnEnd();
  });

  test('the frame, opened on its own, still has an opaque origin', async ({ page }) => {
    // The browser asks for a favicon, which this site does not have there.
    await page.route('**/favicon.ico', (route) => route.fulfill({ status: 204 }));
    await page.goto('/py-frame.html');
    expect(await page.evaluate(() => self.origin)).toBe('null');
  });
});
