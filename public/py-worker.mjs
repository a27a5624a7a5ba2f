// The Browser sandbox's Python: Pyodide in a worker of the page's Python
// frame (py-frame.js), whose origin is opaque. The frame starts it as a
// classic worker from a blob: URL (so `indexURL` is absolute, and Pyodide is
// loaded with a dynamic import()); the file keeps its .mjs name.
//
// The page posts JSON strings (through the frame): {cmd:"init", indexURL},
// then {cmd:"run", run, code, fresh} and {cmd:"cancel", run} (drops a
// waiting run, cancels the running one if it awaits something); and the
// frame, once, an object {cmd:"irq", buf} whose buffer (a SharedArrayBuffer
// of 16 bytes) interrupts a computing program: the frame writes the run's id
// as a float64 at byte 8, then 2 into the int32 at byte 0, so that a stop
// never reaches another run than the one meant.
// The worker posts JSON strings back: {t:"loading", stage}, {t:"ready",
// ms, packages}, {t:"failed", message}, and for a run {t:"out", run, stream,
// text}, {t:"result", run, data}, {t:"error", run, name, value, traceback},
// then {t:"done", run}. Runs happen one at a time, in the order posted.
// A pandas frame or series printed alone is a {t:"result"} too, posted
// where it was printed (see the print hook in RUNNER).
//
// The page forwards a run's messages as socket frames, and the server closes
// the socket on a frame over 256 KiB: so every message about a run is kept
// small, its text measured as the UTF-8 of its JSON (escapes included), cut
// where needed with a visible mark, and output is split into pieces.
// Output is also gathered into fewer, bigger pieces (each one becomes a
// stored event), yet it still shows while a long program computes.

'use strict';

let pyodide = null;
let runCell = null;
let cancelCell = null;
let preimport = null;
let ready = null;
const queue = [];
let busy = false;
let current = 0;

// Sizes, in bytes of JSON-escaped UTF-8.
const PIECE = 16 * 1024; // one piece of output
const TEXT_MAX = 64 * 1024; // a result's text, an error's value
// A frame's data (the Python side keeps its rows within this); with a
// result's text and HTML, a message stays under the socket's 256 KiB.
const TABLE_MAX = 96 * 1024;
const TABLE_MIME = 'application/vnd.runcell.table+json';
const LINE_MAX = 4 * 1024; // one traceback line
const TRACE_MAX = 64 * 1024; // all of a traceback's lines
const NAME_MAX = 200; // an error's name
const NOTE_MAX = 4 * 1024; // why Python failed to start
const CUT = '\u2026 (cut)';
// Output waits at most this long (ms) to be sent with more.
const FLUSH_MS = 50;
// How often a stop is looked for while packages load.
const STOP_POLL_MS = 50;

const post = (message) => postMessage(JSON.stringify(message));

// Packages that `import` does not name: zoneinfo needs tzdata's database.
const EXTRA_IMPORTS = [[/\bzoneinfo\b|\bZoneInfo\b/, 'tzdata']];

// Runs each cell: globals of their own, the value of the last expression as
// a MIME bundle, errors with the runner's own frames removed, and a clear
// word when an import is not available offline. Each cell's code is in
// linecache under a name of its own, so that tracebacks show its lines.
//
// It also shows data frames as the jail's kernel does (jail/kernel/kind.rs
// TABLE_DATA and notebook_hooks.py, the same rules): a DataFrame in a
// bundle comes with its data (runcell's table MIME type, a JSON text here:
// every value of a bundle is text), and a frame or series printed alone is
// shown as a bundle (its text exactly as print writes it, its HTML, its
// data) where it was printed, through _show; any other print is print.
const RUNNER = `
import builtins, json, sys, asyncio, linecache, traceback
from pyodide.code import eval_code_async

_offline = set()
_ns = {"__name__": "__main__"}
_cells = 0
# The running cell's task, and whether the page stopped it.
_task = None
_stopped = False
# Texts are clipped here only to spare copying huge ones into JavaScript:
# the worker cuts them again by their size in bytes, and marks the cut.
_CLIP = 100_000
_LINES = 100
# Set by the worker: posts a bundle (JSON text) where the program is; True
# when it did.
_show = None
_stdout = sys.stdout
_TABLE_TYPE = "application/vnd.runcell.table+json"
# A frame's data: its first 10,000 rows or 2 MB of values, as in the jail,
# and no more rows than fit in one message about a run: the JSON of the
# data, escaped once more as a text of the message, within TABLE_MAX of the
# worker (less room for the columns).
_TABLE_ROWS = 10_000
_TABLE_CHARS = 2_000_000
_TABLE_BYTES = 96 * 1024 - 8 * 1024


def _clip(text):
    return text[:_CLIP]


def _error(e, filename):
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
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
        "value": _clip(value),
        "traceback": [_clip(l.rstrip("\\n")) for l in lines[-_LINES:]],
    }


def _escaped_size(text):
    """The bytes of an ASCII JSON text once it is a text in another JSON."""
    return len(text) + text.count('"') + text.count("\\\\")


def _table_data(df):
    """The frame's data as the jail's kernel gives it (kind.rs TABLE_DATA),
    as JSON text; None for headers over several columns."""
    try:
        from pandas.io.formats.format import format_array
    except Exception:
        format_array = None

    def texts(values):
        if format_array is not None:
            try:
                return [v.strip() for v in format_array(values, None)]
            except Exception:
                pass
        return [str(v) for v in values]

    def name(n):
        return " ".join(map(str, n)) if isinstance(n, tuple) else ("" if n is None else str(n))

    if df.columns.nlevels > 1:
        return None
    head = df.head(_TABLE_ROWS)
    values = [texts(head.index.get_level_values(i)._values) for i in range(head.index.nlevels)]
    values += [texts(head.iloc[:, j]._values) for j in range(head.shape[1])]
    index = [name(n) for n in df.index.names]
    columns = index + [name(c) for c in df.columns]
    rows, chars, size = [], 0, _escaped_size(json.dumps(columns))
    for i in range(len(head)):
        row = [column[i] for column in values]
        chars += sum(map(len, row))
        size += _escaped_size(json.dumps(row)) + 2
        if chars > _TABLE_CHARS or size > _TABLE_BYTES:
            break
        rows.append(row)
    return json.dumps(
        {"columns": columns, "index_columns": len(index), "rows": rows, "total_rows": len(df)}
    )


def _bundle(value):
    data = {"text/plain": _clip(repr(value))}
    html = getattr(value, "_repr_html_", None)
    if callable(html):
        try:
            h = html()
            if isinstance(h, str) and len(h) <= _CLIP:
                data["text/html"] = h
        except Exception:
            pass
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(value, pandas.DataFrame):
        try:
            table = _table_data(value)
        except Exception:
            table = None
        if table is not None:
            data[_TABLE_TYPE] = table
    return data


def _printed_table(value):
    """The bundle a frame or series printed alone is shown as, or None
    (notebook_hooks.py's printed_table)."""
    pandas = sys.modules.get("pandas")
    if pandas is None:
        return None
    if isinstance(value, pandas.Series):
        name = "" if value.name is None else value.name
        frame = value.to_frame(name=name)
    elif isinstance(value, pandas.DataFrame):
        frame = value
    else:
        return None
    if frame.shape[0] == 0 or frame.shape[1] == 0 or frame.columns.nlevels > 1:
        return None
    data = _bundle(frame)
    if _TABLE_TYPE not in data:
        return None
    data["text/plain"] = _clip(str(value))
    return data


_plain_print = builtins.print


def _print(*values, sep=" ", end="\\n", file=None, flush=False):
    to_stdout = file is None or file is _stdout
    if len(values) == 1 and end in ("\\n", None) and to_stdout and sys.stdout is _stdout:
        try:
            table = None if _show is None else _printed_table(values[0])
            text = None if table is None else json.dumps(table)
        except Exception:
            text = None
        if text is not None:
            # What was printed before comes first.
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
            if _show(text):
                return
    _plain_print(*values, sep=sep, end=end, file=file, flush=flush)


_print.__doc__ = _plain_print.__doc__
builtins.print = _print


async def run_cell(code, fresh):
    global _cells, _task, _stopped
    if fresh:
        _ns.clear()
        _ns["__name__"] = "__main__"
        for old in [f for f in linecache.cache if f.startswith("<cell ")]:
            del linecache.cache[old]
    _cells += 1
    filename = f"<cell {_cells}>"
    # mtime None: linecache.checkcache leaves the entry alone.
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    _task, _stopped = asyncio.current_task(), False
    try:
        value = await eval_code_async(code, globals=_ns, filename=filename)
    except BaseException as e:
        error = _error(e, filename)
        if _stopped and isinstance(e, asyncio.CancelledError):
            error["name"], error["value"] = "KeyboardInterrupt", "stopped"
            error["traceback"][-1] = "KeyboardInterrupt: stopped"
        return {"error": error}
    finally:
        _task = None
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
    if value is None:
        return {}
    _ns["_"] = value
    return {"result": _bundle(value)}


def _preimport(code):
    """Imports the page's packages that the code imports (those the lock file
    lists, never the person's own modules), before the program's time
    starts: "import sympy" takes seconds in the page, and is not the
    program's. True when a stop interrupted it. An interrupted import leaves
    half-run modules behind that would break the program's own import: what
    it added is dropped, so the next import starts clean."""
    from pyodide.code import find_imports
    try:
        names = find_imports(code)
    except BaseException:
        return False
    for name in names:
        if name not in _offline or name in sys.modules:
            continue
        before = set(sys.modules)
        try:
            __import__(name)
        except BaseException as e:
            for added in set(sys.modules) - before:
                sys.modules.pop(added, None)
            if isinstance(e, KeyboardInterrupt):
                return True
    return False


def _cancel():
    """Stops the running cell while it awaits something."""
    global _stopped
    if _task is not None and not _task.done():
        _stopped = True
        _task.cancel()


run_cell
`;

// --- Sizes -----------------------------------------------------------------

// The UTF-8 size of the code point at `i` once JSON-escaped, and how many
// UTF-16 units it takes; `text` is well-formed.
function unitAt(text, i) {
  const c = text.charCodeAt(i);
  if (c < 0x80) {
    if (c === 0x22 || c === 0x5c) return [1, 2];
    if (c >= 0x20) return [1, 1];
    // \b \t \n \f \r, others as \u00XX.
    return [1, c === 8 || c === 9 || c === 10 || c === 12 || c === 13 ? 2 : 6];
  }
  if (c < 0x800) return [1, 2];
  if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) return [2, 4];
  return [1, 3];
}

// A lone surrogate would make the page's JSON unreadable: it becomes U+FFFD.
const wellFormed = (text) => (typeof text.toWellFormed === 'function' ? text.toWellFormed() : text);

// How much of `text` (UTF-16 units, ending on a code point) fits in `max`
// bytes, and their size.
function fitting(text, max) {
  let i = 0;
  let size = 0;
  while (i < text.length) {
    const [units, bytes] = unitAt(text, i);
    if (size + bytes > max) break;
    size += bytes;
    i += units;
  }
  return [i, size];
}

function sizeOf(text) {
  return fitting(text, Infinity)[1];
}

// `text` whole if it fits in `max` bytes, else cut to fit, the cut marked.
function cut(text, max) {
  text = wellFormed(String(text));
  const [end] = fitting(text, max);
  if (end === text.length) return text;
  const [keep] = fitting(text, max - sizeOf(CUT));
  return text.slice(0, keep) + CUT;
}

// `text` in pieces of at most `max` bytes each, split between code points.
function pieces(text, max) {
  text = wellFormed(text);
  const out = [];
  let rest = text;
  while (rest.length) {
    const [end] = fitting(rest, max);
    out.push(rest.slice(0, end));
    rest = rest.slice(end);
  }
  return out;
}

// Traceback lines within the limits: each line cut, then the last lines
// that fit in `total` kept (the end says what went wrong), with a line
// saying how many earlier ones were left out.
function fitLines(lines, lineMax, total) {
  const cutLines = lines.map((line) => cut(line, lineMax));
  // The reserve holds the "left out" line; 3 bytes per line for quotes and
  // the comma.
  let room = total - 64;
  let first = cutLines.length;
  while (first > 0) {
    const size = sizeOf(cutLines[first - 1]) + 3;
    if (size > room) break;
    room -= size;
    first -= 1;
  }
  const kept = cutLines.slice(first);
  if (first > 0) kept.unshift(`\u2026 (${first} earlier traceback lines cut)`);
  return kept;
}

// --- Messages about a run --------------------------------------------------

function postResult(run, data) {
  const fitted = {};
  for (const [mime, text] of Object.entries(data)) {
    if (typeof text !== 'string') continue;
    if (mime === 'text/plain') fitted[mime] = cut(text, TEXT_MAX);
    // Cut HTML (or data) would be broken: too big, it is left out (the
    // plain text stays).
    else if (sizeOf(wellFormed(text)) <= (mime === TABLE_MIME ? TABLE_MAX : TEXT_MAX)) fitted[mime] = wellFormed(text);
  }
  if (!('text/plain' in fitted)) return false;
  post({ t: 'result', run, data: fitted });
  return true;
}

// Called by Python (its `_show`) with a bundle's JSON for a frame printed
// alone: posted where the program is, after the output before it. False
// (the program prints it as text) when it cannot be.
function show(text) {
  try {
    const data = JSON.parse(String(text));
    if (!current || data === null || typeof data !== 'object' || Array.isArray(data)) return false;
    flushOut();
    return postResult(current, data);
  } catch {
    return false;
  }
}

function postError(run, name, value, traceback = []) {
  post({
    t: 'error',
    run,
    name: cut(name, NAME_MAX),
    value: cut(value, TEXT_MAX),
    traceback: fitLines(traceback, LINE_MAX, TRACE_MAX),
  });
}

const why = (err) => String(err && err.message ? err.message : err);

// --- Output ------------------------------------------------------------------

// Output not sent yet: one stream's text for one run at a time, so that
// stdout and stderr keep their order.
let pending = { run: 0, stream: '', text: '', size: 0 };
let lastSent = -Infinity;
let timer = null;

// Sends the output gathered: all of it, or (`all` false) only whole pieces.
function flushOut(all = true) {
  if (timer !== null) {
    clearTimeout(timer);
    timer = null;
  }
  if (!pending.text) return;
  const { run, stream } = pending;
  const parts = pieces(pending.text, PIECE);
  const rest = !all && sizeOf(parts[parts.length - 1]) < PIECE ? parts.pop() : '';
  for (const text of parts) post({ t: 'out', run, stream, text });
  pending = { run, stream, text: rest, size: sizeOf(rest) };
  lastSent = performance.now();
  if (rest) timer = setTimeout(flushOut, FLUSH_MS);
}

// Output of the running program: sent at once after a quiet spell, else
// gathered for at most FLUSH_MS or a piece's size.
function emit(run, stream, text) {
  if (!run || !text) return;
  if (pending.text && (pending.stream !== stream || pending.run !== run)) flushOut();
  pending.run = run;
  pending.stream = stream;
  pending.text += text;
  pending.size += sizeOf(text);
  if (performance.now() - lastSent >= FLUSH_MS) flushOut();
  else if (pending.size >= PIECE) flushOut(false);
  else if (timer === null) timer = setTimeout(flushOut, FLUSH_MS);
}

// Called while Python computes (see `signals`): the timer cannot fire then,
// so output that waited long enough is sent from here.
function tick() {
  if (pending.text && performance.now() - lastSent >= FLUSH_MS) flushOut();
}

function writer(stream) {
  const decoder = new TextDecoder();
  return {
    write(bytes) {
      emit(current, stream, decoder.decode(bytes, { stream: true }));
      return bytes.length;
    },
  };
}

// --- Interrupts --------------------------------------------------------------

// The page's shared words ({flag, run}), when it is cross-origin isolated.
let shared = null;
// Whether the last read of the signal buffer raised the interrupt.
let raised = false;
// The run a cancel message stopped while it was running.
let cancelled = 0;
// The run's own Python is running (its program, or the imports before it):
// only then does a stop raise KeyboardInterrupt. Pyodide's package loader
// is Python too, and a wheel cut off half unpacked would stay broken.
let programRuns = false;

function interrupted() {
  return current !== 0 && shared !== null && Atomics.load(shared.flag, 0) === 2 && shared.run[0] === current;
}

function clearInterrupt(run) {
  if (shared !== null && shared.run[0] === run) Atomics.store(shared.flag, 0, 0);
}

// What Pyodide takes for its interrupt buffer: Python reads [0] every few
// steps (2 raises KeyboardInterrupt) and then writes 0. Reading it says 2
// only for a stop meant for the running program, and gives the worker a
// moment to send output while Python computes.
const signals = {
  get 0() {
    tick();
    raised = programRuns && interrupted();
    return raised ? 2 : 0;
  },
  set 0(value) {
    if (value === 0 && raised) {
      clearInterrupt(current);
      raised = false;
    }
  },
};

// --- Runs --------------------------------------------------------------------

async function init(indexURL) {
  const started = performance.now();
  try {
    post({ t: 'loading', stage: 'downloading Python' });
    const { loadPyodide } = await import(indexURL + 'pyodide.mjs');
    pyodide = await loadPyodide({ indexURL });
    post({ t: 'loading', stage: 'starting Python' });
    pyodide.setStdout(writer('stdout'));
    pyodide.setStderr(writer('stderr'));
    pyodide.setInterruptBuffer(signals);
    runCell = pyodide.runPython(RUNNER);
    pyodide.globals.set('_show', show);
    cancelCell = pyodide.globals.get('_cancel');
    preimport = pyodide.globals.get('_preimport');
    const lock = await (await fetch(indexURL + 'pyodide-lock.json')).json();
    const packages = Object.values(lock.packages).flatMap((p) => p.imports);
    pyodide.globals.get('_offline').update(pyodide.toPy(packages));
    post({ t: 'ready', ms: Math.round(performance.now() - started), packages });
  } catch (err) {
    post({ t: 'failed', message: cut(why(err), NOTE_MAX) });
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

// Packages load one run after another: a run stopped while its packages
// loaded leaves the loading going, and the next run's waits for it to end
// (Pyodide would take a package being installed for one already there).
let loads = Promise.resolve();
function loadInTurn(code) {
  const load = loads.then(() => loadPackagesFor(code));
  loads = load.catch(() => {});
  return load;
}

// Resolves when the page stops `run` (its interrupt, or a cancel) while the
// worker waits on something other than Python; `end` stops looking.
function whenStopped(run) {
  let poll = null;
  const promise = new Promise((resolve) => {
    poll = setInterval(() => {
      if (cancelled === run || interrupted()) resolve(true);
    }, STOP_POLL_MS);
  });
  return { promise, end: () => clearInterval(poll) };
}

async function run({ run, code, fresh }) {
  current = run;
  // Stopped while it waited, or while its packages loaded.
  const stoppedEarly = () => {
    if (cancelled !== run && !interrupted()) return false;
    clearInterrupt(run);
    postError(run, 'KeyboardInterrupt', 'stopped before it began');
    return true;
  };
  try {
    if (stoppedEarly()) return;
    // Packages load while no Python runs to see a stop: one is looked for
    // meanwhile, and answered at once (the loading goes on, for next time).
    const stop = whenStopped(run);
    let problems;
    try {
      problems = await Promise.race([loadInTurn(code).catch((err) => [why(err)]), stop.promise]);
    } finally {
      stop.end();
    }
    if (stoppedEarly()) return;
    for (const problem of problems) emit(run, 'stderr', problem + '\n');
    programRuns = true;
    let preempted;
    try {
      preempted = preimport(code);
    } finally {
      programRuns = false;
    }
    if (preempted) {
      clearInterrupt(run);
      postError(run, 'KeyboardInterrupt', 'stopped before it began');
      return;
    }
    if (stoppedEarly()) return;
    // The program begins: its time limit counts from here, not from the
    // wait for Python or its packages.
    post({ t: 'started', run });
    programRuns = true;
    let reply;
    try {
      reply = await runCell(code, fresh);
    } finally {
      programRuns = false;
    }
    const answer = reply.toJs({ dict_converter: Object.fromEntries });
    reply.destroy();
    flushOut();
    if (answer.result) postResult(run, answer.result);
    if (answer.error) postError(run, answer.error.name, answer.error.value, answer.error.traceback);
  } catch (err) {
    flushOut();
    postError(run, 'BrowserError', why(err));
  } finally {
    flushOut();
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
        postError(run, 'BrowserError', `Python could not start in this page (${why(err)}): reload the page to try again, or pick another sandbox`);
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
    shared = { flag: new Int32Array(data.buf, 0, 1), run: new Float64Array(data.buf, 8, 1) };
    return;
  }
  const message = JSON.parse(data);
  if (message.cmd === 'init') {
    ready = init(message.indexURL);
    ready.catch(() => {});
  } else if (message.cmd === 'cancel') {
    const at = queue.findIndex((m) => m.run === message.run);
    if (at >= 0) {
      // A run stopped before it began.
      queue.splice(at, 1);
      postError(message.run, 'KeyboardInterrupt', 'stopped before it began');
      post({ t: 'done', run: message.run });
    } else if (message.run === current) {
      // The running program awaits something (a computing one keeps this
      // message waiting until it ends; the shared words reach it). Raising
      // KeyboardInterrupt now would hit the event loop's own code: its task
      // is cancelled instead.
      cancelled = current;
      clearInterrupt(current);
      if (cancelCell) cancelCell();
    }
  } else if (message.cmd === 'run') {
    queue.push(message);
    drain().catch((err) => post({ t: 'failed', message: cut(String(err), NOTE_MAX) }));
  }
};
