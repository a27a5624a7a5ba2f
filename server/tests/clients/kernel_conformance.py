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
import sys
import tempfile
import unittest

import jupyter_kernel_test as jkt

NODE_KERNEL = os.environ["RUNCELL_NODE_KERNEL"]
SPECS = tempfile.mkdtemp(prefix="runcell-kernelspecs-")


def spec(name, argv, language):
    directory = os.path.join(SPECS, "kernels", name)
    os.makedirs(directory)
    with open(os.path.join(directory, "kernel.json"), "w") as f:
        json.dump({"argv": argv, "display_name": name, "language": language}, f)


spec("runcell-javascript", ["node", NODE_KERNEL, "-f", "{connection_file}"], "javascript")
spec("runcell-typescript", ["node", NODE_KERNEL, "-f", "{connection_file}", "--typescript"], "typescript")
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


class TypeScript(JavaScript):
    kernel_name = "runcell-typescript"
    language_name = "typescript"
    file_extension = ".ts"
    code_execute_result = [
        {"code": "const answer: number = 6 * 7;\nanswer", "result": "42"},
        {"code": "interface P { a: string }\nconst p: P = { a: 'x' };\np.a", "result": "x"},
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


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    ok = result.wasSuccessful() and result.testsRun > 0
    print(f"{'ok' if ok else 'FAILED'}: kernel conformance, {result.testsRun} tests, "
          f"{len(result.skipped)} skipped (no sample for them)")
    sys.exit(0 if ok else 1)
