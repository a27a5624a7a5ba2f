// The Browser sandbox's frame. The notebook page loads /py-frame.html in an
// iframe sandboxed without `allow-same-origin`: this document's origin is
// opaque, so the Python it starts carries no cookie and no other credential
// of runcell's. Whatever the programs fetch from runcell goes without the
// user's cookies, and CORS keeps them from reading anything but the public
// Python files (the only ones served with `Access-Control-Allow-Origin: *`).
//
// A worker's script must be same-origin with the document that starts it,
// and nothing is same-origin with an opaque origin: the worker's script is
// fetched (CORS) and started from a blob: URL made here. It is a classic
// worker: Chromium refuses module workers from such blobs; the worker loads
// Pyodide with a dynamic import(), which classic workers have.
//
// This frame is cross-origin isolated itself (the page is, it sends COEP,
// and the iframe is allowed `cross-origin-isolated`), so it can share memory
// with its worker, though not with the page (another agent cluster). Stop:
// the page posts {cmd:"stop", run}; this frame's main thread is idle while
// Python computes in the worker, so it writes the interrupt words the worker
// polls (see py-worker.mjs), and posts the worker a cancel for a program
// that awaits something. Without isolation Stop is the page's to do: it ends
// this frame and starts another.
//
// To the page, over the MessageChannel whose other end goes with the first
// message to it: JSON strings, the worker's own (see py-worker.mjs) and
// {t:"frame", interruptible}, {t:"broken", message} (the worker could not be
// loaded, or raised an error). From the page: JSON strings for the worker,
// passed on as they are, and {cmd:"stop", run}. The page reads all of it as
// untrusted input: the programs can post anything to this frame.
'use strict';

(() => {
  // Opened on its own (its policy sandboxes it all the same): nothing to do.
  if (parent === self) return;
  const WORKER = '/py-worker.mjs';
  // What the first message to the page says, with the channel's end.
  const HELLO = 'runcell-py-frame';
  // Why the worker failed, at most this many characters.
  const NOTE_MAX = 1000;
  // This document's address is runcell's, though its origin is not.
  const here = new URL(location.href);

  const channel = new MessageChannel();
  const page = channel.port1;
  const toPage = (message) => page.postMessage(JSON.stringify(message));
  const note = (text) => String(text || '').slice(0, NOTE_MAX);

  // The interrupt words, shared with the worker: the run to stop (a float64
  // at byte 8), then 2 in the flag (an int32 at byte 0).
  let shared = null;
  if (self.crossOriginIsolated && typeof SharedArrayBuffer === 'function') {
    const buffer = new SharedArrayBuffer(16);
    shared = { buffer, flag: new Int32Array(buffer, 0, 1), run: new Float64Array(buffer, 8, 1) };
  }

  let worker = null;
  // What the page posted before the worker was there.
  const waiting = [];
  const toWorker = (text) => (worker ? worker.postMessage(text) : waiting.push(text));

  page.onmessage = (event) => {
    if (typeof event.data !== 'string') return;
    let message;
    try {
      message = JSON.parse(event.data);
    } catch {
      return;
    }
    if (message && message.cmd === 'stop' && Number.isSafeInteger(message.run) && message.run > 0) {
      toWorker(JSON.stringify({ cmd: 'cancel', run: message.run }));
      if (shared !== null) {
        shared.run[0] = message.run;
        // The atomic store publishes the run written before it.
        Atomics.store(shared.flag, 0, 2);
      }
      return;
    }
    toWorker(event.data);
  };

  // Waits in the channel until the page takes its end.
  toPage({ t: 'frame', interruptible: shared !== null });
  parent.postMessage(HELLO, here.origin, [channel.port2]);

  async function start() {
    try {
      const response = await fetch(new URL(WORKER, here), { credentials: 'omit', cache: 'no-cache' });
      if (!response.ok) throw new Error(`${WORKER} answered ${response.status}`);
      const source = await response.text();
      let url = URL.createObjectURL(new Blob([source], { type: 'text/javascript' }));
      worker = new Worker(url, { name: 'python' });
      worker.onmessage = (event) => {
        // The worker runs: its script's address is no longer needed.
        if (url !== null) {
          URL.revokeObjectURL(url);
          url = null;
        }
        if (typeof event.data === 'string') page.postMessage(event.data);
      };
      worker.onerror = (event) => toPage({ t: 'broken', message: note(event.message) });
      if (shared !== null) worker.postMessage({ cmd: 'irq', buf: shared.buffer });
      for (const text of waiting.splice(0)) worker.postMessage(text);
    } catch (err) {
      toPage({ t: 'broken', message: note(`the Python worker could not be loaded: ${err && err.message ? err.message : err}`) });
    }
  }
  start();
})();
