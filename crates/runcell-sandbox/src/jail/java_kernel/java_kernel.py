"""runcell's Java kernel: a Jupyter kernel (ipykernel's wrapper-kernel base,
which speaks the protocol) whose cells run in JShell, in a JVM it starts
(`JShellKernel.java`, beside this file) and drives over that JVM's stdin
and stdout.

Usage: python3 -I java_kernel.py -f CONNECTION_FILE

Interrupts: the JVM runs in its own process group, so the SIGINT that
Jupyter's interrupt sends to this kernel's group never ends it; this kernel
asks JShell to stop the cell instead.
"""

import asyncio
import fnmatch
import os
import queue
import signal
import subprocess
import sys
import threading

from ipykernel.kernelapp import IPKernelApp
from ipykernel.kernelbase import Kernel

HERE = os.path.dirname(os.path.abspath(__file__))
ENGINE = os.path.join(HERE, "JShellKernel.java")
# The engine compiled by the server, when it could: a JVM given the source
# compiles it first (1.3 s more on one core).
# RUNCELL_JSHELL_CLASSES names them elsewhere (a test that runs this kernel
# outside a jail, from the source tree); the server never sets it.
CLASSES = os.environ.get("RUNCELL_JSHELL_CLASSES") or os.path.join(HERE, "java")
JAVA = os.environ.get("RUNCELL_JAVA", "/usr/bin/java")
# The most bytes of one frame from the JVM (its own frames are smaller: an
# output chunk is at most 8 KiB, an answer bounded where it is made).
MAX_FRAME = 16 << 20
# The cells kept for `history_request`: at most this many, each cut to
# MAX_HISTORY_CELL characters.
MAX_HISTORY = 1000
MAX_HISTORY_CELL = 64 << 10
# JShell's own prompt language: a JVM of one collector thread, sized by the
# jail's memory limit, started for a short-lived, interactive program.
JVM_OPTIONS = [
    "-XX:+UseSerialGC",
    "-XX:MaxRAMPercentage=60",
    "-XX:TieredStopAtLevel=1",
    "-Xss8m",
    "-Xshare:auto",
    "-Dfile.encoding=UTF-8",
    "-Dstdout.encoding=UTF-8",
    "-Dstderr.encoding=UTF-8",
]


class EngineGone(Exception):
    """The JVM ended or broke its wire."""


class Engine:
    """The JVM running JShell, and the frames it sends."""

    def __init__(self):
        # The class path is the engine's own directory, never the working
        # directory (the JVM's default): a class file the session left in
        # its home is never loaded in place of the engine's own.
        if os.path.isfile(os.path.join(CLASSES, "JShellKernel.class")):
            engine = ["-cp", CLASSES, "JShellKernel"]
        else:
            engine = ["-cp", HERE, ENGINE]
        self.process = subprocess.Popen(
            [JAVA, *JVM_OPTIONS, *engine],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            start_new_session=True,
        )
        self.frames = queue.Queue()
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        stream = self.process.stdout
        try:
            while True:
                head = stream.readline(80)
                if not head.endswith(b"\n"):
                    break
                name, _, length = head.decode("ascii", "replace").strip().partition(" ")
                size = int(length or 0)
                if size < 0 or size > MAX_FRAME:
                    break
                body = stream.read(size)
                if len(body) < size:
                    break
                self.frames.put((name, body.decode("utf-8", "replace")))
        except (OSError, ValueError):
            pass
        self.frames.put(None)

    def send(self, name, payload=""):
        body = payload.encode("utf-8", "surrogatepass")
        try:
            with self.lock:
                self.process.stdin.write(f"{name} {len(body)}\n".encode("ascii") + body)
                self.process.stdin.flush()
        except (OSError, ValueError) as e:
            raise EngineGone(str(e)) from e

    def next_frame(self, timeout=None):
        try:
            frame = self.frames.get(timeout=timeout)
        except queue.Empty:
            return None
        if frame is None:
            self.frames.put(None)
            raise EngineGone("the JVM ended")
        return frame


class JavaKernel(Kernel):
    implementation = "runcell-java"
    implementation_version = "1.0"
    language = "java"
    language_version = "17"
    language_info = {
        "name": "java",
        "version": "17",
        "mimetype": "text/x-java-source",
        "file_extension": ".jshell",
        "pygments_lexer": "java",
        "codemirror_mode": "text/x-java",
    }
    banner = "Java (JShell), runcell"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # This kernel's cells, for `history_request`: (line, source).
        self.cells = []
        self.engine = Engine()
        # Wait for JShell to be up, so that the first cell is not slow.
        while True:
            frame = self.engine.next_frame()
            if frame[0] == "ready":
                break

    async def _frames(self):
        """The engine's frames until the next answer, as they come."""
        loop = asyncio.get_running_loop()
        while True:
            frame = await loop.run_in_executor(None, self.engine.next_frame, 0.5)
            if frame is not None:
                yield frame

    async def do_execute(
        self, code, silent, store_history=True, user_expressions=None, allow_stdin=False, **_
    ):
        if store_history and not silent:
            self.cells.append((self.execution_count, code[:MAX_HISTORY_CELL]))
            del self.cells[:-MAX_HISTORY]
        previous = signal.signal(signal.SIGINT, lambda *_: self._stop())
        try:
            self.engine.send("exec", code)
            error = None
            async for name, body in self._frames():
                if name in ("out", "err"):
                    if not silent:
                        stream = "stdout" if name == "out" else "stderr"
                        self.send_response(
                            self.iopub_socket, "stream", {"name": stream, "text": body}
                        )
                elif name == "result":
                    if not silent:
                        self.send_response(
                            self.iopub_socket,
                            "execute_result",
                            {
                                "execution_count": self.execution_count,
                                "data": {"text/plain": body},
                                "metadata": {},
                            },
                        )
                elif name in ("display", "update"):
                    if not silent:
                        display_id, _, rest = body.partition("\0")
                        mime, _, data = rest.partition("\0")
                        self.send_response(
                            self.iopub_socket,
                            "display_data" if name == "display" else "update_display_data",
                            {
                                "data": {mime: data},
                                "metadata": {},
                                "transient": {"display_id": display_id},
                            },
                        )
                elif name == "clear":
                    if not silent:
                        self.send_response(
                            self.iopub_socket, "clear_output", {"wait": body == "wait"}
                        )
                elif name == "error":
                    ename, _, rest = body.partition("\0")
                    evalue, _, traceback = rest.partition("\0")
                    error = {
                        "ename": ename,
                        "evalue": evalue,
                        "traceback": traceback.rstrip("\n").split("\n") if traceback else [],
                    }
                    if not silent:
                        self.send_response(self.iopub_socket, "error", error)
                elif name == "done":
                    break
        except EngineGone as e:
            error = {"ename": "DeadKernel", "evalue": f"the Java engine ended: {e}", "traceback": []}
            self.send_response(self.iopub_socket, "error", error)
        finally:
            signal.signal(signal.SIGINT, previous)
        if error is not None:
            return {"status": "error", "execution_count": self.execution_count, **error}
        return {
            "status": "ok",
            "execution_count": self.execution_count,
            "payload": [],
            "user_expressions": {},
        }

    def _stop(self):
        try:
            self.engine.send("stop")
        except EngineGone:
            pass

    async def _ask(self, name, payload, answer):
        """Sends a request and returns the body of its answer `answer`."""
        self.engine.send(name, payload)
        async for frame_name, body in self._frames():
            if frame_name == answer:
                return body
            if frame_name == "error":
                return None

    async def do_complete(self, code, cursor_pos):
        cursor = len(code) if cursor_pos is None else cursor_pos
        body = await self._ask("complete", f"{cursor}\0{code}", "matches")
        if body is None:
            return {"status": "ok", "matches": [], "cursor_start": cursor,
                    "cursor_end": cursor, "metadata": {}}
        start, end, *matches = body.split("\0")
        return {
            "status": "ok",
            "matches": matches,
            "cursor_start": int(start),
            "cursor_end": int(end),
            "metadata": {},
        }

    async def do_inspect(self, code, cursor_pos, detail_level=0, omit_sections=()):
        cursor = len(code) if cursor_pos is None else cursor_pos
        body = await self._ask("inspect", f"{cursor}\0{code}", "found")
        if not body:
            return {"status": "ok", "found": False, "data": {}, "metadata": {}}
        return {"status": "ok", "found": True, "data": {"text/plain": body}, "metadata": {}}

    async def do_is_complete(self, code):
        body = await self._ask("is_complete", code, "complete")
        status, _, indent = (body or "unknown\0").partition("\0")
        reply = {"status": status}
        if status == "incomplete":
            reply["indent"] = indent
        return reply

    async def do_history(
        self, hist_access_type, output, raw, session=None, start=None, stop=None,
        n=None, pattern=None, unique=False, **_
    ):
        """This kernel's own cells (session 1), as IPython answers: `tail`,
        `range` (lines from `start` up to `stop`) and `search` (a glob)."""
        cells = self.cells
        if hist_access_type == "range":
            first = start or 1
            cells = [c for c in cells if c[0] >= first and (stop is None or c[0] < stop)]
        elif hist_access_type == "search":
            matching = [c for c in cells if fnmatch.fnmatchcase(c[1], pattern or "*")]
            if unique:
                seen, kept = set(), []
                for cell in reversed(matching):
                    if cell[1] not in seen:
                        seen.add(cell[1])
                        kept.append(cell)
                matching = kept[::-1]
            cells = matching[-n:] if n else matching
        elif hist_access_type == "tail":
            cells = cells[-n:] if n else cells
        else:
            cells = []
        if output:
            history = [(1, line, (source, None)) for line, source in cells]
        else:
            history = [(1, line, source) for line, source in cells]
        return {"status": "ok", "history": history}

    async def do_shutdown(self, restart):
        try:
            self.engine.process.kill()
        except OSError:
            pass
        return {"status": "ok", "restart": restart}


if __name__ == "__main__":
    IPKernelApp.launch_instance(kernel_class=JavaKernel)
