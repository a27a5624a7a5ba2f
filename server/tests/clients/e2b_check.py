"""E2B's official Python SDKs (e2b, e2b-code-interpreter) using runcell as
their cloud.

Usage: E2B_API_URL=URL E2B_SANDBOX_URL=URL E2B_API_KEY=KEY \
       E2B_VALIDATE_API_KEY=false python e2b_check.py

Covers create, run_code (state, text, stdout, png results, errors;
JavaScript, TypeScript and R kernels; environment variables per language),
code contexts (their order, one in /root), connect, files.write/read/list,
commands.run (pip install too), set_timeout, list, kill, and a kill during a run. Exits non-zero, saying what went wrong, on the first unexpected answer.
"""

import os
import sys
import threading
import time

from e2b import AuthenticationException, CommandExitException, SandboxQuery, TimeoutException
from e2b import Sandbox as BaseSandbox
from e2b_code_interpreter import Sandbox

from checks import check


def languages(sandbox):
    """JavaScript, TypeScript and R as E2B's own language suites use them."""
    js = lambda code, **kw: sandbox.run_code(code, language="js", **kw)
    js("const z = 1")
    check(js("z").text == "1", "js context: state is kept between cells", js("z").text)
    awaited = js("async function main() {\n  return 'Hello, World!'\n}\n\nawait main()")
    check(awaited.text == "Hello, World!", "js top level await", awaited.text)
    es6 = js("const add = (x, y) => x + y;\nadd(1, 2)")
    check(es6.text == "3", "js es6: the last expression is the value", es6.text)
    imported = js("import path from 'path'\npath.join('a', 'b')")
    check(imported.text == "a/b", "js import (ESM syntax)", imported.text)
    check(js("process.cwd()").text == "/home/user", "js cwd", None)
    ctx = sandbox.create_code_context(cwd="/home", language="js")
    cwd = sandbox.run_code("process.cwd()", context=ctx)
    check(cwd.text == "/home", "a js context runs in its cwd", cwd.text)
    ts = sandbox.run_code("function subtract(x: number, y: number): number {\n  return x - y;\n}\n\nsubtract(1, 2)",
                          language="ts")
    check(ts.text == "-1", "ts simple: types are stripped", ts.text)
    bad = sandbox.run_code("const a = 1\nnull.x", language="ts")
    check(bad.error is not None and bad.error.name == "TypeError" and "<anonymous>:2" in bad.error.traceback,
          "a ts error names the cell's own line", bad.error)
    env = js("process.env.GREETING")
    check(env.text == "hi", "js sees the sandbox's envs", env.text)
    per_run = js("process.env.FOO", envs={"FOO": "bar"})
    after = js("process.env.FOO || 'default'")
    check((per_run.text, after.text) == ("bar", "default"), "js: a run's envs are set, then undone",
          (per_run.text, after.text))
    r = sandbox.run_code("x <- c(1, 2, 3, 4)\nmean(x)", language="r")
    check(r.results and r.results[0].text == "[1] 2.5", "r runs and shows its value", r.results)
    r_env = sandbox.run_code("Sys.getenv('FOO')", language="r", envs={"FOO": "bar"})
    r_after = sandbox.run_code("Sys.getenv('FOO', unset = 'default')", language="r")
    check(r_env.results[0].text.strip() == '[1] "bar"' and r_after.results[0].text.strip() == '[1] "default"',
          "r: a run's envs are set, then undone", (r_env.results, r_after.results))
    r_global = sandbox.run_code("Sys.getenv('GREETING')", language="r")
    check(r_global.results[0].text.strip() == '[1] "hi"', "r sees the sandbox's envs", r_global.results)
    bash = sandbox.run_code("echo $FOO\nfalse_command_here", language="bash", envs={"FOO": "bar"})
    check(bash.logs.stdout == ["bar\n"], "bash: a run's envs are its environment", bash.logs.stdout)
    check("line 2" in "".join(bash.logs.stderr), "bash: error lines are the program's own",
          bash.logs.stderr)


def addons(sandbox):
    """What E2B's template adds to Python: charts, data frames' data, PIL."""
    figure = sandbox.run_code(
        "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9], label='squares')\n"
        "plt.title('Squares')\nplt.xlabel('n')\nplt.show()")
    charts = [r.chart for r in figure.results if r.chart is not None]
    check(len(charts) == 1, "a figure comes with its chart", figure.results)
    chart = charts[0]
    check(str(getattr(chart.type, "value", chart.type)) == "line" and chart.title == "Squares",
          "the chart is a line chart with its title", chart)
    check(chart.elements and [tuple(p) for p in chart.elements[0].points][:2] == [(1, 1), (2, 4)],
          "the chart's points are the data", chart.elements)
    frame = sandbox.run_code("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})")
    check(frame.results and frame.results[0].data == {"a": [1, 2], "b": ["x", "y"]},
          "a data frame comes with its data", frame.results)
    image = sandbox.run_code("from PIL import Image\nImage.new('RGB', (8, 8), 'red').save('red.png')")
    check(any(r.png for r in image.results), "saving a PIL image shows it", image.results)
    shown = sandbox.run_code("Image.new('RGB', (8, 8), 'blue').show()")
    check(any(r.png for r in shown.results), "Image.show() shows it in the cell", shown.results)


def main():
    sandbox = Sandbox.create(timeout=120, metadata={"suite": "e2b_check"}, envs={"GREETING": "hi"})
    check(bool(sandbox.sandbox_id), "a sandbox is created", sandbox.sandbox_id)

    first = sandbox.run_code("x = 41\nprint('hello from runcell')")
    check(first.logs.stdout == ["hello from runcell\n"], "stdout is streamed into logs", first.logs.stdout)
    check(first.error is None, "a good run has no error", first.error)
    check(first.execution_count == 1, "executions are counted", first.execution_count)

    second = sandbox.run_code("x + 1")
    check(second.text == "42", "state is kept between calls and Execution.text is the value", second.text)
    check(second.execution_count == 2, "the count goes on", second.execution_count)

    env = sandbox.run_code("import os; os.environ['GREETING']")
    check(env.text == "hi", "the sandbox's envs are set", env.text)
    per_run = sandbox.run_code("import os; os.environ.get('ONCE')", envs={"ONCE": "yes"})
    check(per_run.text == "yes", "a run's own envs are set", per_run.text)
    after = sandbox.run_code("import os; print(os.environ.get('ONCE'))")
    check(after.logs.stdout == ["None\n"], "a run's own envs are undone after it", after.logs.stdout)

    streamed = []
    sandbox.run_code("import sys; print('a'); print('b', file=sys.stderr)",
                     on_stdout=lambda m: streamed.append(("out", m.line)),
                     on_stderr=lambda m: streamed.append(("err", m.line)))
    check(("out", "a\n") in streamed and ("err", "b\n") in streamed, "callbacks get stdout and stderr", streamed)

    plot = sandbox.run_code(
        "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()"
    )
    pngs = [r.png for r in plot.results if r.png]
    check(len(pngs) == 1 and pngs[0].startswith("iVBORw0KGgo"), "a plot is a png result", plot.results)

    failed = sandbox.run_code("1 / 0")
    check(failed.error is not None and failed.error.name == "ZeroDivisionError",
          "an exception is Execution.error", failed.error)
    check("division by zero" in failed.error.value, "the error says why", failed.error.value)

    addons(sandbox)

    js = sandbox.run_code("console.log(6 * 7)", language="javascript")
    check(js.logs.stdout == ["42\n"], "javascript runs", js.logs.stdout)
    languages(sandbox)

    context = sandbox.create_code_context(language="python", cwd="/home/user")
    check(bool(context.id), "a code context is created", context)
    sandbox.run_code("y = 'own'", context=context)
    own = sandbox.run_code("y", context=context)
    check(own.text == "own", "a context keeps its own state", own.text)
    leak = sandbox.run_code("'y' in dir()")
    check(leak.text == "False", "contexts do not share variables", leak.text)
    contexts = sandbox.list_code_contexts()
    check(any(c.id == context.id for c in contexts), "contexts are listed", contexts)
    # E2B's own suite: the newest context is listed last, and one may start
    # in root's home.
    rooted = sandbox.create_code_context(language="python", cwd="/root")
    contexts = sandbox.list_code_contexts()
    check([c.id for c in contexts][-2:] == [context.id, rooted.id],
          "contexts are listed in the order they were made", [c.id for c in contexts])
    check(contexts[-1].cwd == "/root", "a context's cwd is listed", contexts[-1])
    where = sandbox.run_code("import os; os.getcwd()", context=rooted)
    check(where.text.strip("'") == "/root", "a context runs in its cwd, /root", where.text)
    plain = sandbox.create_code_context()
    check(sandbox.list_code_contexts()[-1].id == plain.id, "a context made with no options is listed last",
          sandbox.list_code_contexts())

    # The newest SDK connects with `{}` (no timeout): the sandbox and its
    # state are there.
    again = Sandbox.connect(sandbox.sandbox_id)
    kept = again.run_code("x")
    check(kept.text == "41", "Sandbox.connect reaches the same kernel", kept.text)

    info = sandbox.files.write("/home/user/data/a.txt", "hello world\n")
    check(info.path == "/home/user/data/a.txt", "a file is written", info)
    check(sandbox.files.read("/home/user/data/a.txt") == "hello world\n", "a file is read back", None)
    raw = sandbox.files.read("/home/user/data/a.txt", format="bytes")
    check(bytes(raw) == b"hello world\n", "a file is read as bytes", raw)
    names = [e.name for e in sandbox.files.list("/home/user/data")]
    check(names == ["a.txt"], "a directory is listed", names)
    check(sandbox.files.exists("/home/user/data/a.txt"), "files.exists finds a file", None)
    check(not sandbox.files.exists("/home/user/nope.txt"), "files.exists misses a missing file", None)
    seen = sandbox.run_code("print(open('/home/user/data/a.txt').read(), end='')")
    check(seen.logs.stdout == ["hello world\n"], "code sees an uploaded file", seen.logs.stdout)
    sandbox.run_code("open('made.csv', 'w').write('a,b\\n1,2\\n')")
    check(sandbox.files.read("/home/user/made.csv") == "a,b\n1,2\n", "a file the code wrote is read", None)
    try:
        sandbox.files.read("/etc/passwd")
        check(False, "a path outside the home is refused", "it was read")
    except Exception as e:  # the SDK raises its own exception types
        check("outside" in str(e), "a path outside the home is refused", str(e))

    result = sandbox.commands.run("echo out; echo err >&2; echo $GREETING")
    check(result.exit_code == 0, "a command exits 0", result)
    check(result.stdout == "out\nhi\n", "a command's stdout", result.stdout)
    check(result.stderr == "err\n", "a command's stderr", result.stderr)
    listed = sandbox.commands.run("ls /home/user", cwd="/home/user")
    check("made.csv" in listed.stdout, "a command sees the session's files", listed.stdout)
    try:
        sandbox.commands.run("exit 3")
        check(False, "a failing command raises", "no exception")
    except CommandExitException as e:
        check(e.exit_code == 3, "a failing command raises with its exit code", e.exit_code)

    # A package the image lacks, installed by a command through runcell's
    # index (the session has no network), then imported by the code context.
    installed = sandbox.commands.run("pip install humanize==4.9.0", timeout=240)
    check(installed.exit_code == 0, "pip install runs as a command", installed.stderr[-800:])
    check("runcell's package index served humanize 4.9.0" in installed.stderr,
          "the command reports what the index served", installed.stderr[-800:])
    used = sandbox.run_code("import humanize; print(humanize.naturalsize(10**6))")
    check(used.logs.stdout == ["1.0 MB\n"], "the code imports what the command installed",
          (used.logs.stdout, used.error))

    sandbox.set_timeout(300)
    print("ok: the timeout is set")

    other = Sandbox.create(metadata={"suite": "other"})
    listed = Sandbox.list().next_items()
    ids = [s.sandbox_id for s in listed]
    check({sandbox.sandbox_id, other.sandbox_id} <= set(ids), "the sandboxes are listed", ids)
    running = [s for s in listed if s.sandbox_id == sandbox.sandbox_id][0]
    check(running.metadata.get("suite") == "e2b_check", "its metadata is listed", running.metadata)
    check(running.template_id == "code-interpreter-v1", "its template is listed", running.template_id)
    mine = Sandbox.list(query=SandboxQuery(metadata={"suite": "e2b_check"})).next_items()
    mine = [s.sandbox_id for s in mine]
    check(sandbox.sandbox_id in mine and other.sandbox_id not in mine, "the list filters by metadata", mine)
    check(other.kill() is True, "the other sandbox is killed", None)

    check(sandbox.is_running(), "the sandbox is running", None)
    check(sandbox.kill() is True, "the sandbox is killed", None)
    check(BaseSandbox.kill(sandbox.sandbox_id) is False, "a killed sandbox is gone", None)
    check(not sandbox.is_running(), "a killed sandbox is not running", None)

    # Killed while a cell runs: the run ends at once, and the SDK says why
    # (E2B's own suite: test_run_code_raises_when_sandbox_is_killed_during_execution).
    doomed = Sandbox.create(timeout=120)
    killer = threading.Timer(2.0, doomed.kill)
    killer.start()
    started = time.monotonic()
    try:
        doomed.run_code("import time; time.sleep(100)", timeout=150)
        check(False, "a run in a killed sandbox raises", "it returned")
    except TimeoutException as e:
        check("killed while the request was in progress" in str(e),
              "a run in a killed sandbox raises that it was killed", str(e))
    killer.join()
    took = time.monotonic() - started
    check(took < 60, "the kill ends the run, not the program's own end", took)

    os.environ["E2B_API_KEY"] = "rc_wrong"
    try:
        Sandbox.create()
        check(False, "a wrong key is refused", "a sandbox was created")
    except AuthenticationException as e:
        check(True, "a wrong key is refused", str(e))
    print("ok: all E2B SDK calls answered")


if __name__ == "__main__":
    main()
