// How long the page takes to load and come alive on a phone, in Chromium:
// the home page and a session with an answered turn (a table, a chart, an
// explanation), each with a cold cache and again with a warm one, under
// Lighthouse's mobile throttling (150 ms round trip, 1.6 Mbit/s down,
// 750 kbit/s up, the CPU 4x slower than this machine's).
//
// Usage: node page-load.mjs URL [RUNS]   (a runcell serving the scripted or
// any model; the session's turn runs fenced code as-is, so no model writes it)
//
// Prints, per page and cache, the median of RUNS loads: the first contentful
// paint (the server-rendered page, readable before any
// script), the wasm bundle's bytes on the wire and when it arrived, and when
// the page was live (`data-hydrated` on <html>: every button works).
import { launch, newSession } from './chromium.mjs';

const [base, runsArg] = process.argv.slice(2);
if (!base) {
  console.error('usage: node page-load.mjs URL [RUNS]');
  process.exit(2);
}
const runs = Number(runsArg ?? 3);
const PHONE = {
  latency: 150,
  downloadThroughput: (1.6 * 1024 * 1024) / 8,
  uploadThroughput: (750 * 1024) / 8,
  cpu: 4,
};

const browser = await launch();
const setup = await browser.newPage();
await setup.goto(base + '/');
const id = await newSession(setup);
const code = [
  'import matplotlib.pyplot as plt, pandas as pd',
  'df = pd.DataFrame({"region": ["north", "south", "east"], "revenue": [1200.5, 980.25, 1530.0]})',
  'display(df)',
  'plt.bar(df.region, df.revenue); plt.title("Revenue by region"); plt.show()',
].join('\n');
const answered = await setup.request.post(`${base}/api/sessions/${id}/ask`, {
  data: { text: '```python\n' + code + '\n```' },
});
if (!answered.ok()) throw new Error(`the turn failed: ${answered.status()} ${await answered.text()}`);
await answered.text();
const cookies = await setup.context().cookies();

// When <html> gets data-hydrated, in the page's own clock.
const markLive = () => {
  const seen = () => {
    if (document.documentElement?.dataset.hydrated === 'true' && window.__live === undefined) {
      window.__live = performance.now();
    }
  };
  new MutationObserver(seen).observe(document, { attributes: true, subtree: true, attributeFilter: ['data-hydrated'] });
};

async function load(context, url) {
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.emulateNetworkConditions', {
    offline: false,
    latency: PHONE.latency,
    downloadThroughput: PHONE.downloadThroughput,
    uploadThroughput: PHONE.uploadThroughput,
  });
  await cdp.send('Emulation.setCPUThrottlingRate', { rate: PHONE.cpu });
  await page.goto(url, { waitUntil: 'commit' });
  await page.waitForFunction(() => window.__live !== undefined, null, { timeout: 120_000 });
  const m = await page.evaluate(() => {
    const fcp = performance.getEntriesByName('first-contentful-paint')[0];
    const wasm = performance.getEntriesByType('resource').find((r) => r.name.endsWith('.wasm'));
    return {
      fcp: fcp ? fcp.startTime : NaN,
      wasmBytes: wasm ? wasm.transferSize : NaN,
      wasmEnd: wasm ? wasm.responseEnd : NaN,
      live: window.__live,
    };
  });
  await page.close();
  return m;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};
const rows = [];
for (const [name, path] of [['home', '/'], ['session', `/sessions/${id}`]]) {
  for (const cache of ['cold', 'warm']) {
    const samples = [];
    for (let i = 0; i < runs; i++) {
      const context = await browser.newContext({
        viewport: { width: 390, height: 844 }, deviceScaleFactor: 3, isMobile: true, hasTouch: true,
      });
      await context.addCookies(cookies);
      await context.addInitScript(markLive);
      if (cache === 'warm') {
        // The first visit fills the cache; the measured one is the second.
        const warm = await context.newPage();
        await warm.goto(base + path);
        await warm.waitForFunction(() => document.documentElement.dataset.hydrated === 'true');
        await warm.close();
      }
      samples.push(await load(context, base + path));
      await context.close();
    }
    const pick = (k) => median(samples.map((s) => s[k]));
    rows.push({
      page: name, cache, runs,
      fcp_ms: Math.round(pick('fcp')),
      wasm_bytes_on_wire: Math.round(pick('wasmBytes')),
      wasm_arrived_ms: Math.round(pick('wasmEnd')),
      live_ms: Math.round(pick('live')),
    });
  }
}
await browser.close();

console.log('phone profile: 150 ms RTT, 1.6 Mbit/s down, 750 kbit/s up, CPU 4x slower; medians');
console.log('page     cache  first paint  wasm on the wire        live');
for (const r of rows) {
  console.log(`${r.page.padEnd(8)} ${r.cache.padEnd(5)} ${String(r.fcp_ms).padStart(9)} ms  `
    + `${String(r.wasm_bytes_on_wire).padStart(7)} B by ${String(r.wasm_arrived_ms).padStart(5)} ms ${String(r.live_ms).padStart(7)} ms`);
}
for (const r of rows) console.log(JSON.stringify(r));
