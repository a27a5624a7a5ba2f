// The Browser sandbox's Python: Pyodide in a module worker of the page.
//
// The page posts JSON strings: {cmd:"init", indexURL}, then {cmd:"run", run,
// code, fresh} and {cmd:"cancel", run} (for a run still waiting); and once an
// object {cmd:"irq", buf} whose buffer (a SharedArrayBuffer) interrupts the
// running program when the page writes 2 into it.
// The worker posts JSON strings back: {t:"loading", stage}, {t:"ready",
// ms, packages}, {t:"failed", message}, and for a run {t:"out", run, stream,
// text}, {t:"result", run, data}, {t:"error", run, name, value, traceback},
// then {t:"done", run}. Runs happen one at a time, in the order posted.

let pyodide = null;
let runCell = null;
let ready = null;
const queue = [];
let busy = false;
let current = 0;
let interrupt = null;
// Text is cut into pieces no bigger than this (characters), so that no
// frame the page forwards is too big for the socket.
const PIECE = 16 * 1024;

const post = (message) => postMessage(JSON.stringify(message));

// Packages that `import` does not name: zoneinfo needs tzdata's database.
const EXTRA_IMPORTS = [[/\bzoneinfo\b|\bZoneInfo\b/, 'tzdata']];

// Runs each cell: globals of their own, the value of the last expression as
// a MIME bundle, errors with the runner's own frames removed, and a clear
// word when an import is not available offline.
const RUNNER = `
import sys, traceback
from pyodide.code import eval_code_async

_offline = set()
_ns = {"__name__": "__main__"}
_MAX_REPR = 100_000


def _cut(text):
    return text if len(text) <= _MAX_REPR else text[:_MAX_REPR] + "\u2026"


def _error(e):
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != "<cell>":
        tb = tb.tb_next
    lines = traceback.format_exception(type(e), e, tb)
    value = str(e)
    name = getattr(e, "name", None)
    if isinstance(e, ModuleNotFoundError) and name and name.split(".")[0] not in _offline:
        value += (
            ": the Browser sandbox has Python's standard library and "
            + ", ".join(sorted(_offline))
            + "; other packages are not available offline in the page"
            + " (pick the local sandbox for them)"
        )
        lines[-1] = f"{type(e).__name__}: {value}\\n"
    return {
        "name": type(e).__name__,
        "value": _cut(value),
        "traceback": [_cut(l.rstrip("\\n")) for l in lines[-50:]],
    }


def _bundle(value):
    data = {"text/plain": _cut(repr(value))}
    html = getattr(value, "_repr_html_", None)
    if callable(html):
        try:
            h = html()
            if isinstance(h, str) and len(h) <= _MAX_REPR:
                data["text/html"] = h
        except Exception:
            pass
    return data


async def run_cell(code, fresh):
    if fresh:
        _ns.clear()
        _ns["__name__"] = "__main__"
    try:
        value = await eval_code_async(code, globals=_ns, filename="<cell>")
    except BaseException as e:
        return {"error": _error(e)}
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
    if value is None:
        return {}
    _ns["_"] = value
    return {"result": _bundle(value)}


run_cell
`;

function pieces(text) {
  const out = [];
  let i = 0;
  while (i < text.length) {
    let end = Math.min(i + PIECE, text.length);
    // Never split a surrogate pair.
    if (end < text.length && /[\uD800-\uDBFF]/.test(text[end - 1])) end -= 1;
    out.push(text.slice(i, end));
    i = end;
  }
  return out;
}

function writer(stream) {
  const decoder = new TextDecoder();
  return {
    write(bytes) {
      const text = decoder.decode(bytes, { stream: true });
      if (text && current) {
        for (const piece of pieces(text)) post({ t: 'out', run: current, stream, text: piece });
      }
      return bytes.length;
    },
  };
}

async function init(indexURL) {
  const started = performance.now();
  try {
    post({ t: 'loading', stage: 'downloading Python' });
    const { loadPyodide } = await import(indexURL + 'pyodide.mjs');
    pyodide = await loadPyodide({ indexURL });
    post({ t: 'loading', stage: 'starting Python' });
    pyodide.setStdout(writer('stdout'));
    pyodide.setStderr(writer('stderr'));
    runCell = pyodide.runPython(RUNNER);
    const lock = await (await fetch(indexURL + 'pyodide-lock.json')).json();
    const packages = Object.values(lock.packages).flatMap((p) => p.imports);
    pyodide.globals.get('_offline').update(pyodide.toPy(packages));
    post({ t: 'ready', ms: Math.round(performance.now() - started), packages });
  } catch (err) {
    post({ t: 'failed', message: String(err && err.message ? err.message : err) });
    throw err;
  }
}

async function loadPackagesFor(code) {
  const problems = [];
  const callbacks = { messageCallback: () => {}, errorCallback: (m) => problems.push(m) };
  await pyodide.loadPackagesFromImports(code, callbacks);
  for (const [pattern, name] of EXTRA_IMPORTS) {
    if (pattern.test(code)) await pyodide.loadPackage(name, callbacks);
  }
  return problems;
}

async function run({ run, code, fresh }) {
  current = run;
  // An interrupt meant for an earlier run must not stop this one.
  if (interrupt) interrupt[0] = 0;
  try {
    const problems = await loadPackagesFor(code);
    for (const problem of problems) post({ t: 'out', run, stream: 'stderr', text: problem + '\n' });
    const reply = await runCell(code, fresh);
    const answer = reply.toJs({ dict_converter: Object.fromEntries });
    reply.destroy();
    if (answer.result) post({ t: 'result', run, data: answer.result });
    if (answer.error) post({ t: 'error', run, ...answer.error });
  } catch (err) {
    post({ t: 'error', run, name: 'BrowserError', value: String(err && err.message ? err.message : err), traceback: [] });
  } finally {
    current = 0;
    post({ t: 'done', run });
  }
}

async function drain() {
  if (busy) return;
  busy = true;
  try {
    try {
      await ready;
    } catch (err) {
      // Python could not start: every run waiting says so.
      while (queue.length) {
        const { run } = queue.shift();
        post({ t: 'error', run, name: 'BrowserError', value: "the page's Python could not start: " + String(err && err.message ? err.message : err), traceback: [] });
        post({ t: 'done', run });
      }
      return;
    }
    while (queue.length) await run(queue.shift());
  } finally {
    busy = false;
  }
}

onmessage = (event) => {
  const data = event.data;
  if (data && typeof data === 'object' && data.cmd === 'irq') {
    interrupt = data.buf;
    ready.then(() => pyodide.setInterruptBuffer(data.buf), () => {});
    return;
  }
  const message = JSON.parse(data);
  if (message.cmd === 'init') {
    ready = init(message.indexURL);
    ready.catch(() => {});
  } else if (message.cmd === 'cancel') {
    // A run stopped before it began.
    const at = queue.findIndex((m) => m.run === message.run);
    if (at >= 0) {
      queue.splice(at, 1);
      post({ t: 'error', run: message.run, name: 'KeyboardInterrupt', value: 'stopped before it began', traceback: [] });
      post({ t: 'done', run: message.run });
    }
  } else if (message.cmd === 'run') {
    queue.push(message);
    drain().catch((err) => post({ t: 'failed', message: String(err) }));
  }
};
