"""The worker's Python (public/py-worker.mjs, read on stdin) with real pandas,
for runcell's tests: what a program's prints become.

It takes RUNNER out of the worker's source, runs it with stand-ins for
Pyodide's modules and for the worker's `_show`, then runs each program of
the JSON list in argv[1] and writes, one JSON line a program, what it
showed, in order: ["out", text], ["err", text] (a stream's text written
one after another is one) and ["shown", bundle] (the
table data read back as JSON), then ["bundle", mimes] for the last
expression's bundle (its MIME types) when the program ends with `_ = ...`.

Usage: python3 -I -c <this file> '<programs as JSON>' < public/py-worker.mjs
"""

import json
import re
import sys
import types

TABLE = "application/vnd.runcell.table+json"

source = sys.stdin.read()
runner = source.split("const RUNNER = `", 1)[1].split("\n`;", 1)[0]
# A JavaScript template's escapes: \\ is \, \` is `.
runner = re.sub(r"\\(.)", r"\1", runner)

code = types.ModuleType("pyodide.code")
code.eval_code_async = None
code.find_imports = None
sys.modules["pyodide"] = types.ModuleType("pyodide")
sys.modules["pyodide.code"] = code

events = []


class Stream:
    def __init__(self, kind):
        self.kind = kind

    def write(self, text):
        if not text:
            pass
        elif events and events[-1][0] == self.kind:
            events[-1][1] += text
        else:
            events.append([self.kind, text])
        return len(text)

    def flush(self):
        pass


def show(text):
    bundle = json.loads(text)
    if TABLE in bundle:
        bundle[TABLE] = json.loads(bundle[TABLE])
    events.append(["shown", bundle])
    return True


real_stdout = sys.stdout
sys.stdout, sys.stderr = Stream("out"), Stream("err")
worker = {"__name__": "worker"}
exec(runner, worker)
worker["_show"] = show

for program in json.loads(sys.argv[1]):
    events = []
    ns = {"__name__": "__main__"}
    exec(program, ns)
    if "_" in ns:
        events.append(["bundle", sorted(worker["_bundle"](ns["_"]))])
    real_stdout.write(json.dumps(events) + "\n")
