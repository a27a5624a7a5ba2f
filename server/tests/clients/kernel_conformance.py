"""The kernels' own conformance run: jupyter_kernel_test (Jupyter's suite
for kernel authors, from PyPI) against runcell's JavaScript and TypeScript
kernel (node_kernel.js) and R's IRkernel, each started by jupyter_client
from a kernel spec, over TCP and real libzmq (outside the jail: this checks
the kernels' protocol, the jail has its own tests).

Usage: RUNCELL_NODE_KERNEL=path/to/node_kernel.js python kernel_conformance.py
Exits non-zero if any test fails.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import jupyter_kernel_test as jkt

NODE_KERNEL = os.environ["RUNCELL_NODE_KERNEL"]
SPECS = tempfile.mkdtemp(prefix="runcell-kernelspecs-")


def spec(name, argv, language, env=None):
    directory = os.path.join(SPECS, "kernels", name)
    os.makedirs(directory)
    with open(os.path.join(directory, "kernel.json"), "w") as f:
        json.dump({"argv": argv, "display_name": name, "language": language, "env": env or {}}, f)


spec("runcell-javascript", ["node", NODE_KERNEL, "-f", "{connection_file}"], "javascript")
spec("runcell-typescript", ["node", NODE_KERNEL, "-f", "{connection_file}", "--typescript"], "typescript")
# runcell's Java kernel: the ipykernel wrapper beside node_kernel.js's
# directory, run by the sandbox's Python (which has ipykernel), with its
# JShell engine as a source file (the server compiles it; this run does not).
JAVA_KERNEL = os.path.join(os.path.dirname(NODE_KERNEL), "java_kernel", "java_kernel.py")
SANDBOX_PYTHON = os.environ.get("RUNCELL_SANDBOX_PYTHON", "/opt/runcell/python/bin/python3")
# The engine compiled as the server compiles it (its display API needs its
# classes on the class path).
JSHELL_CLASSES = tempfile.mkdtemp(prefix="runcell-jshell-")
subprocess.run(["javac", "-d", JSHELL_CLASSES,
                os.path.join(os.path.dirname(JAVA_KERNEL), "JShellKernel.java")], check=True)
spec("runcell-java", [SANDBOX_PYTHON, "-I", JAVA_KERNEL, "-f", "{connection_file}"], "java",
     env={"RUNCELL_JSHELL_CLASSES": JSHELL_CLASSES})
spec("runcell-r", ["R", "--slave", "--no-save", "--no-restore", "-e", "IRkernel::main()",
                   "--args", "{connection_file}"], "R")
os.environ["JUPYTER_PATH"] = SPECS


class JavaScript(jkt.KernelTests):
    kernel_name = "runcell-javascript"
    language_name = "javascript"
    file_extension = ".js"
    code_hello_world = "console.log('hello, world')"
    code_stderr = "console.error('oops')"
    code_generate_error = "throw new Error('boom')"
    code_execute_result = [
        {"code": "6 * 7", "result": "42"},
        {"code": "'text'", "result": "text"},
        {"code": "let n = 1; let n2 = n + 1; n2", "result": "2"},
        {"code": "await Promise.resolve([1, 2])", "result": "[ 1, 2 ]"},
    ]
    code_display_data = [
        {"code": "display.html('<b>bold</b>')", "mime": "text/html"},
        {"code": "display.svg('<svg xmlns=\"http://www.w3.org/2000/svg\"/>')", "mime": "image/svg+xml"},
    ]
    # jupyter_kernel_test compares a sample's matches with the reply's as sets.
    completion_samples = [
        {"text": "Math.ma", "matches": {"max"}},
        {"text": "parseFl", "matches": {"parseFloat"}},
        {"text": "JSON.str", "matches": {"stringify"}},
        {"text": "'abc'.toUpperC", "matches": {"toUpperCase"}},
        {"text": "[1, 2].fla", "matches": {"flat", "flatMap"}},
        {"text": "new Date().getFullY", "matches": {"getFullYear"}},
        {"text": "fun", "matches": {"function"}},
        # The cursor counts code points: an astral character before it is one.
        {"text": "'\U0001F600'; Math.ma", "matches": {"max"}},
        # Nothing inside a string or a comment, nothing for what V8 cannot
        # evaluate without side effects.
        {"text": "'Math.ma", "matches": set()},
        {"text": "// Math.ma", "matches": set()},
        {"text": "console.log('x').toStr", "matches": set()},
        {"text": "Math."},
    ]
    complete_code_samples = [
        "1 + 1",
        "let a = 1;",
        "function f() { return 1 }",
        "await Promise.resolve(1)",
        "for await (const x of []) {}",
        "const s = `a ${1} b`",
        "import fs from 'fs'",
        "if (a) {\n  b()\n}",
        "/re/g.test('x')",
    ]
    incomplete_code_samples = [
        "function f() {",
        "foo(",
        "[1, 2,",
        "`abc",
        "`abc ${",
        "let a =",
        "/* comment",
        "if (x)",
        "await foo(",
        "'abc\\",
    ]
    invalid_code_samples = ["1 +* 2", "foo)", "}", "(]", "let let = 1", "'abc", "const a"]
    code_inspect_sample = "Math.max"
    supported_history_operations = ("tail", "range", "search")
    code_history_pattern = "6 ? 7"


class TypeScript(JavaScript):
    kernel_name = "runcell-typescript"
    language_name = "typescript"
    file_extension = ".ts"
    code_execute_result = [
        {"code": "const answer: number = 6 * 7;\nanswer", "result": "42"},
        {"code": "interface P { a: string }\nconst p: P = { a: 'x' };\np.a", "result": "x"},
    ]
    code_history_pattern = "const answer*"
    # Completion reads the code as typed: annotations before the cursor are no matter.
    completion_samples = JavaScript.completion_samples + [
        {"text": "const n: number = Math.ma", "matches": {"max"}},
    ]
    complete_code_samples = JavaScript.complete_code_samples + [
        "let x: number = 1",
        "interface P { a: string }",
        "type T = { a: string }",
        "function f(a: number): number { return a }",
        "const id = <T,>(x: T): T => x",
        "enum E { A, B }",
    ]
    incomplete_code_samples = JavaScript.incomplete_code_samples + [
        "interface P {",
        "let x: number =",
        "function f(a: number) {",
        "type T = { a: string",
        "const id = <T,>(x: T): T =>",
        "let a = b as",
    ]
    invalid_code_samples = JavaScript.invalid_code_samples + [
        "let x: number = 1)",
        "interface P }",
        "let x: number = 1 2",
    ]


class R(jkt.KernelTests):
    kernel_name = "runcell-r"
    language_name = "R"
    file_extension = ".r"
    code_hello_world = "cat('hello, world')"
    code_stderr = "message('oops')"
    code_generate_error = "stop('boom')"
    # IRkernel shows values as display data, not as execute results.
    code_display_data = [{"code": "6 * 7", "mime": "text/plain"}]


class Java(jkt.KernelTests):
    kernel_name = "runcell-java"
    language_name = "java"
    file_extension = ".jshell"
    code_hello_world = 'System.out.print("hello, world")'
    code_stderr = 'System.err.println("oops")'
    code_generate_error = 'throw new IllegalStateException("boom")'
    code_execute_result = [
        {"code": "6 * 7", "result": "42"},
        {"code": '"text"', "result": "text"},
        {"code": "int n = 1;\nint n2 = n + 1;\nn2", "result": "2"},
        {"code": "java.util.List.of(1, 2)", "result": "[1, 2]"},
    ]
    completion_samples = [
        {"text": "Math.ma", "matches": {"max("}},
        {"text": "String.valueO", "matches": {"valueOf("}},
        {"text": "Math."},
    ]
    complete_code_samples = ["1 + 1", "int a = 1;", "void f() { }", "class A { }", "import java.util.*;"]
    incomplete_code_samples = ["void f() {", "int[] a = {1,", "for (int i = 0; i < 3; i++) {", "class A {"]
    # JShell tells a cell's shape, not its grammar: `1 +* 2;` is complete to it
    # (and a compile error when run).
    invalid_code_samples = [")", "}", "foo)"]
    code_inspect_sample = "Math.max"
    supported_history_operations = ("tail", "range", "search")
    code_history_pattern = "6 ? 7"
    # IJava's names, as E2B's Java kernel has them.
    code_display_data = [
        {"code": 'display("<b>bold</b>", "text/html")', "mime": "text/html"},
        {"code": 'display("plain")', "mime": "text/plain"},
    ]
    code_clear_output = "clearOutput()"


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    ok = result.wasSuccessful() and result.testsRun > 0
    print(f"{'ok' if ok else 'FAILED'}: kernel conformance, {result.testsRun} tests, "
          f"{len(result.skipped)} skipped (no sample for them)")
    sys.exit(0 if ok else 1)
