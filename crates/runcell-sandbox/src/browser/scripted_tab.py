"""A scripted tab: the page side of the Browser sandbox, for runcell's tests.

It plays what a page and its Pyodide worker do (app/src/browser/page_python/
and public/py-worker.mjs) with CPython, speaking the page's socket frames,
one JSON object a line: it reads the server's (`browser_run`,
`browser_stop`, `error`) on stdin and writes the page's (`browser_started`, `browser_output`,
`browser_done`) on stdout. As in the worker:

- runs happen one at a time, in the order sent; each cell runs in globals
  kept from one run to the next, emptied when the run is `fresh`;
- output is sent as it is printed, gathered for at most 50 ms or a piece of
  16 KiB (its size measured as the UTF-8 of its JSON, escapes included);
- the value of a cell's last expression (unless the cell ends with `;`)
  comes back as a MIME bundle (`text/plain`, its repr; `text/html` from
  `_repr_html_`), an exception as an error (name, value, the traceback
  from the cell's own frames), all cut to the worker's sizes;
- a stop (`browser_stop`, or the run's own time limit plus 2 s) raises
  KeyboardInterrupt in the running program, or drops a run that has not
  begun; a program still running 1.5 s after a stop ends this Python, as
  the page ends its frame, after answering every run it had (the Rust side
  then starts another Python, which attaches as a new kernel).

Hostile programs can reach this module (`sys.modules["__main__"]`) and post
frames of their own (`post`, `post_line`), as a page's program can post to
the page: the tests use that to forge frames.

It runs the tests' own programs on the host, as the test process itself:
it is test code, never part of what runcell ships.

Usage: python3 -I -c <this file> <kernel id>
"""

import ast
import json
import linecache
import os
import queue
import signal
import sys
import threading
import time
import traceback

KERNEL = sys.argv[1]

# Sizes, in bytes of JSON-escaped UTF-8, as in py-worker.mjs.
PIECE = 16 * 1024
TEXT_MAX = 64 * 1024
LINE_MAX = 4 * 1024
TRACE_MAX = 64 * 1024
NAME_MAX = 200
CUT = "\u2026 (cut)"
# Texts are clipped to this many characters before they are measured.
CLIP = 100_000
TRACE_LINES = 100
FLUSH_S = 0.05
INTERRUPT_GRACE_S = 1.5
LOCAL_LIMIT_SLACK_S = 2.0

# --- The wire ----------------------------------------------------------------

# Frames go out on a descriptor of their own, written by one thread, so that
# a stop never cuts a frame in two; what a program writes to fd 1 below
# `sys.stdout` (os.write, a child process) lands on stderr instead.
_wire = os.fdopen(os.dup(1), "wb", buffering=0)
os.dup2(2, 1)
_outbox = queue.Queue()
# Put on the outbox by a Python that ends: what was posted before it goes
# out, nothing after it.
_END = object()


def _write_frames():
    while True:
        line = _outbox.get()
        if line is _END:
            os._exit(0)
        try:
            _wire.write(line)
        except OSError:
            os._exit(0)


threading.Thread(target=_write_frames, daemon=True).start()


def post_line(data):
    """Sends `data` (bytes) as one line, as it is."""
    _outbox.put(data + b"\n")


def post(frame):
    post_line(json.dumps(frame, ensure_ascii=False).encode("utf-8", "replace"))


def output(run, output):
    post({"type": "browser_output", "run": run, "output": output})


def done(run):
    post({"type": "browser_done", "run": run, "kernel": KERNEL})


# --- Sizes -------------------------------------------------------------------


def well_formed(text):
    """`text` with any lone surrogate made U+FFFD (the page's JSON needs it)."""
    return str(text).encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def size_of(text):
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8")) - 2


def fitting(text, limit):
    """How many characters of `text` fit in `limit` bytes."""
    low, high = 0, min(len(text), limit)
    while low < high:
        mid = (low + high + 1) // 2
        if size_of(text[:mid]) <= limit:
            low = mid
        else:
            high = mid - 1
    return low


def cut(text, limit):
    """`text` whole if it fits in `limit` bytes, else cut, the cut marked."""
    text = well_formed(text)[:CLIP]
    if size_of(text) <= limit:
        return text
    return text[: fitting(text, limit - size_of(CUT))] + CUT


def pieces(text, limit):
    out = []
    while text:
        end = max(fitting(text, limit), 1)
        out.append(text[:end])
        text = text[end:]
    return out


def fit_lines(lines, line_max, total):
    """The last traceback lines that fit, each cut, the rest said."""
    lines = [cut(line, line_max) for line in lines]
    room = total - 64
    first = len(lines)
    while first > 0 and size_of(lines[first - 1]) + 3 <= room:
        room -= size_of(lines[first - 1]) + 3
        first -= 1
    kept = lines[first:]
    if first > 0:
        kept.insert(0, f"\u2026 ({first} earlier traceback lines cut)")
    return kept


def post_error(run, name, value, lines=()):
    output(
        run,
        {
            "type": "error",
            "name": cut(name, NAME_MAX),
            "value": cut(value, TEXT_MAX),
            "traceback": fit_lines(list(lines), LINE_MAX, TRACE_MAX),
        },
    )


def post_result(run, data):
    fitted = {}
    for mime, text in data.items():
        if mime == "text/plain":
            fitted[mime] = cut(text, TEXT_MAX)
        elif size_of(well_formed(text)) <= TEXT_MAX:
            # Cut HTML would be broken markup: too big, it is left out.
            fitted[mime] = well_formed(text)
    output(run, {"type": "rich", "data": fitted})


# --- Output ------------------------------------------------------------------


class Pending:
    """Output not sent yet: one stream's text of one run at a time."""

    def __init__(self):
        self.lock = threading.RLock()
        self.run = 0
        self.stream = ""
        self.text = ""
        self.last_sent = float("-inf")
        self.timer = None

    def emit(self, run, stream, text):
        if not run or not text:
            return
        with self.lock:
            if self.text and (self.stream != stream or self.run != run):
                self.flush()
            self.run, self.stream = run, stream
            self.text += text
            if time.monotonic() - self.last_sent >= FLUSH_S:
                self.flush()
            elif len(self.text) >= PIECE // 6 and size_of(self.text) >= PIECE:
                self.flush(everything=False)
            elif self.timer is None:
                self.later()

    def later(self):
        self.timer = threading.Timer(FLUSH_S, self.flush)
        self.timer.daemon = True
        self.timer.start()

    def flush(self, everything=True):
        with self.lock:
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            if not self.text:
                return
            parts = pieces(well_formed(self.text), PIECE)
            rest = ""
            if not everything and size_of(parts[-1]) < PIECE:
                rest = parts.pop()
            for text in parts:
                output(self.run, {"type": self.stream, "text": text})
            self.text = rest
            self.last_sent = time.monotonic()
            if rest:
                self.later()


pending = Pending()


class Writer:
    """`sys.stdout` or `sys.stderr` while a cell runs."""

    encoding = "utf-8"
    errors = "strict"

    def __init__(self, run, stream):
        self.run = run
        self.stream = stream

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        pending.emit(self.run, self.stream, text)
        return len(text)

    def flush(self):
        pending.flush()

    def isatty(self):
        return False

    def writable(self):
        return True


# --- Stops -------------------------------------------------------------------

MAIN = threading.main_thread().ident
state = threading.Lock()
# The running run, and the run a stop was asked for (0: none).
current = 0
stopping = 0
# Runs sent and not begun; those of them stopped before they began.
waiting = []
cancelled = set()


def on_interrupt(signum, frame):
    # Raised only in the run the stop was meant for: a stop that lands as a
    # run ends reaches no other.
    if current and stopping == current:
        raise KeyboardInterrupt("stopped")


signal.signal(signal.SIGINT, on_interrupt)


def stop(run, why):
    """Interrupts `run` if it runs, or drops it if it waits."""
    global stopping
    with state:
        if run == current and run:
            stopping = run
            signal.pthread_kill(MAIN, signal.SIGINT)
            timer = threading.Timer(INTERRUPT_GRACE_S, stuck, args=(run, why))
            timer.daemon = True
            timer.start()
        elif run in waiting:
            cancelled.add(run)


def stuck(run, why):
    """A program that did not stop in time ends this Python, as the page
    ends its frame: every run it had is answered first."""
    with state:
        if current != run:
            return
        runs = [run] + [r for r in waiting if r != run]
    output(
        run,
        {
            "type": "stderr",
            "text": f"(The program did not stop when interrupted ({why}), so this page's "
            "Python was ended and is starting again: its variables are gone.)\n",
        },
    )
    for r in runs:
        post_error(r, "KeyboardInterrupt", "stopped")
        done(r)
    _outbox.put(_END)


# --- Runs --------------------------------------------------------------------

ns = {"__name__": "__main__"}
cells = 0


def describe(error, filename):
    """An error as the worker gives it: from the cell's own frames on (and
    without this driver's interrupt handler)."""
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    summary = traceback.TracebackException(type(error), error, tb)
    summary.stack = traceback.StackSummary.from_list(
        [f for f in summary.stack if f.name != on_interrupt.__name__]
    )
    lines = list(summary.format())
    return (
        type(error).__name__,
        str(error)[:CLIP],
        [line.rstrip("\n")[:CLIP] for line in lines[-TRACE_LINES:]],
    )


def bundle(value):
    data = {"text/plain": repr(value)[:CLIP]}
    html = getattr(value, "_repr_html_", None)
    if callable(html):
        try:
            text = html()
            if isinstance(text, str) and len(text) <= CLIP:
                data["text/html"] = text
        except Exception:
            pass
    return data


def execute(code, filename):
    """Runs `code`; the value of its last expression, as Pyodide's
    eval_code gives it."""
    tree = ast.parse(code, filename, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr) and not code.rstrip().endswith(";"):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, filename, "exec"), ns)
    if last is not None:
        return eval(compile(last, filename, "eval"), ns)
    return None


def run_cell(message):
    global current, stopping, cells
    run, code = message.get("run"), message.get("code")
    if not isinstance(run, int) or not isinstance(code, str):
        return
    with state:
        if run in waiting:
            waiting.remove(run)
        began = run not in cancelled
        cancelled.discard(run)
        if began:
            current = run
    if not began:
        post_error(run, "KeyboardInterrupt", "stopped before it began")
        done(run)
        return
    # The program begins: its wall time counts from here, as a page's does.
    post({"type": "browser_started", "run": run})
    timeout_s = message.get("timeout_ms", 0) / 1000 + LOCAL_LIMIT_SLACK_S
    limit = threading.Timer(timeout_s, stop, args=(run, "the time limit"))
    limit.daemon = True
    limit.start()
    if message.get("fresh"):
        ns.clear()
        ns["__name__"] = "__main__"
        for old in [f for f in linecache.cache if f.startswith("<cell ")]:
            del linecache.cache[old]
    cells += 1
    filename = f"<cell {cells}>"
    # mtime None: linecache.checkcache leaves the entry alone.
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    result = error = None
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = Writer(run, "stdout"), Writer(run, "stderr")
    try:
        try:
            value = execute(code, filename)
            if value is not None:
                ns["_"] = value
                result = bundle(value)
        except BaseException as e:
            error = describe(e, filename)
        finally:
            current = stopping = 0
    except KeyboardInterrupt:
        # A stop that landed as the program ended.
        current = stopping = 0
        error = error or ("KeyboardInterrupt", "stopped", [])
    sys.stdout, sys.stderr = streams
    limit.cancel()
    pending.flush()
    if result is not None:
        post_result(run, result)
    if error is not None:
        post_error(run, *error)
    done(run)


runs = queue.Queue()


def read_frames():
    for line in sys.stdin.buffer:
        try:
            frame = json.loads(line)
        except ValueError:
            continue
        if not isinstance(frame, dict):
            continue
        kind = frame.get("type")
        if kind == "browser_run":
            with state:
                waiting.append(frame.get("run"))
            runs.put(frame)
        elif kind == "browser_stop":
            stop(frame.get("run"), "Stop")
        # Anything else (an `error` frame about one of ours) needs nothing.
    runs.put(None)


threading.Thread(target=read_frames, daemon=True).start()

while True:
    message = runs.get()
    if message is None:
        break
    run_cell(message)
pending.flush()
_outbox.put(_END)
threading.Event().wait()
