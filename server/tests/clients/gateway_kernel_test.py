"""jupyter_kernel_test (Jupyter's suite for kernel authors) through runcell's
Jupyter gateway: each class's kernel spec runs `gateway_bridge.py`, which
starts a kernel of that language through the gateway's REST API and relays
ZeroMQ to its WebSocket; so every message the suite checks went through
the gateway as a front end's would, and the kernels themselves run in
runcell's jail.

Usage: gateway_kernel_test.py <runcell /jupyter URL> <API key>
Exits non-zero if any test fails. A language is one class below: its
gateway kernel name (`gateway_kernel`) and its samples.
"""

import json
import os
import sys
import tempfile
import unittest

import jupyter_kernel_test as jkt

RUNCELL, KEY = sys.argv[1].rstrip("/"), sys.argv[2]
BRIDGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gateway_bridge.py")
SPECS = tempfile.mkdtemp(prefix="runcell-gateway-specs-")
os.environ["JUPYTER_PATH"] = SPECS
TIMEOUT = 60


class Gateway(jkt.KernelTests):
    """A kernel of the gateway's, spoken to over the bridge. A subclass
    names the gateway's kernel spec (`gateway_kernel`) and gives samples;
    its local spec is made from that."""

    gateway_kernel = ""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.kernel_name = f"runcell-gateway-{cls.gateway_kernel}"
        directory = os.path.join(SPECS, "kernels", cls.kernel_name)
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "kernel.json"), "w") as f:
            json.dump({
                "argv": [sys.executable, BRIDGE, RUNCELL, KEY, cls.gateway_kernel,
                         "-f", "{connection_file}"],
                "display_name": cls.gateway_kernel,
                "language": cls.language_name,
                "interrupt_mode": "message",
            }, f)

    @classmethod
    def setUpClass(cls):
        # A gateway kernel is a jail session: give it time to start.
        cls.km, cls.kc = jkt.start_new_kernel(kernel_name=cls.kernel_name, startup_timeout=TIMEOUT)

    def execute(self, code):
        """Runs `code`; its reply and its iopub messages (kernel_test's helper)."""
        self.flush_channels()
        return self.execute_helper(code, timeout=TIMEOUT)

    # Display updates: jupyter_kernel_test has no check of its own.
    code_update_display = ""
    update_display_mime = "text/plain"

    def test_update_display_data(self):
        if not self.code_update_display:
            raise unittest.SkipTest("No code update display")
        reply, outputs = self.execute(self.code_update_display)
        self.assertEqual(reply["content"]["status"], "ok")
        shown = [m for m in outputs if m["msg_type"] == "display_data"]
        updated = [m for m in outputs if m["msg_type"] == "update_display_data"]
        self.assertEqual(len(shown), 1, outputs)
        self.assertEqual(len(updated), 1, outputs)
        display_id = shown[0]["content"]["transient"]["display_id"]
        self.assertTrue(display_id)
        self.assertEqual(updated[0]["content"]["transient"]["display_id"], display_id)
        self.assertIn(self.update_display_mime, updated[0]["content"]["data"])
        self.assertNotEqual(shown[0]["content"]["data"], updated[0]["content"]["data"])


class Python(Gateway):
    gateway_kernel = "python3"
    language_name = "python"
    file_extension = ".py"
    code_hello_world = "print('hello, world')"
    code_stderr = "import sys; print('oops', file=sys.stderr)"
    code_generate_error = "raise ValueError('boom')"
    code_execute_result = [{"code": "6 * 7", "result": "42"}, {"code": "'a' + 'b'", "result": "'ab'"}]
    code_display_data = [
        {"code": "from IPython.display import HTML, display; display(HTML('<b>x</b>'))",
         "mime": "text/html"},
        {"code": "display(3)", "mime": "text/plain"},
    ]
    # Completion is IPython's from the live namespace (runcell turns jedi off).
    completion_samples = [
        {"text": "zi", "matches": {"zip"}},
        {"text": "isinsta", "matches": {"isinstance"}},
        {"text": "ZeroDivisionErr", "matches": {"ZeroDivisionError"}},
    ]
    complete_code_samples = ["x = 1", "print('a')", "def f():\n    return 1\n"]
    incomplete_code_samples = ["for i in range(3):", "x = (", "def f():"]
    invalid_code_samples = ["1 +* 2", "x = )"]
    code_inspect_sample = "zip"
    code_page_something = "zip?"
    code_clear_output = "from IPython.display import clear_output\nprint('a')\nclear_output()"
    code_update_display = "h = display('v1', display_id=True)\nh.update('v2')"
    # Not "range": IPython numbers the current session 0 in a range's
    # entries, where the suite expects the number `tail` gave (1).
    supported_history_operations = ("tail", "search")
    code_history_pattern = "6 ? 7"


class R(Gateway):
    gateway_kernel = "ir"
    language_name = "R"
    file_extension = ".r"
    code_hello_world = "cat('hello, world')"
    code_stderr = "message('oops')"
    code_generate_error = "stop('boom')"
    # IRkernel shows values as display data, not as execute results.
    code_display_data = [{"code": "6 * 7", "mime": "text/plain"}]
    completion_samples = [
        {"text": "Sys.getpi", "matches": {"Sys.getpid"}},
        {"text": "x <- nchar", "matches": {"nchar"}},
    ]
    complete_code_samples = ["x <- 1", "f <- function(x) { x }"]
    incomplete_code_samples = ["f <- function(x) {", "x <- c(1,"]
    code_inspect_sample = "mean"
    code_clear_output = "cat('a')\nIRdisplay::clear_output()"


class JavaScript(Gateway):
    gateway_kernel = "javascript"
    language_name = "javascript"
    file_extension = ".js"
    code_hello_world = "console.log('hello, world')"
    code_stderr = "console.error('oops')"
    code_generate_error = "throw new Error('boom')"
    code_execute_result = [{"code": "6 * 7", "result": "42"}]
    code_display_data = [{"code": "display.html('<b>bold</b>')", "mime": "text/html"}]
    completion_samples = [
        {"text": "Math.ma", "matches": {"max"}},
        {"text": "JSON.str", "matches": {"stringify"}},
    ]
    complete_code_samples = ["1 + 1", "let a = 1;"]
    incomplete_code_samples = ["function f() {", "foo("]
    invalid_code_samples = ["1 +* 2"]
    code_inspect_sample = "Math.max"


class TypeScript(JavaScript):
    gateway_kernel = "typescript"
    language_name = "typescript"
    file_extension = ".ts"
    code_execute_result = [{"code": "const answer: number = 6 * 7;\nanswer", "result": "42"}]
    completion_samples = JavaScript.completion_samples + [
        {"text": "const n: number = Math.ma", "matches": {"max"}},
    ]
    complete_code_samples = JavaScript.complete_code_samples + ["interface P { a: string }"]
    incomplete_code_samples = JavaScript.incomplete_code_samples + ["interface P {"]


class Java(Gateway):
    gateway_kernel = "java"
    language_name = "java"
    file_extension = ".jshell"
    code_hello_world = 'System.out.print("hello, world")'
    code_stderr = 'System.err.println("oops")'
    code_generate_error = 'throw new IllegalStateException("boom")'
    code_execute_result = [{"code": "6 * 7", "result": "42"}, {"code": '"a" + "b"', "result": "ab"}]
    # IJava's names, as E2B's Java kernel has them.
    code_display_data = [{"code": 'display("<b>bold</b>", "text/html")', "mime": "text/html"}]
    completion_samples = [
        {"text": "Math.ma", "matches": {"max("}},
        {"text": "String.valueO", "matches": {"valueOf("}},
    ]
    complete_code_samples = ["1 + 1", "int a = 1;", "void f() { }"]
    incomplete_code_samples = ["void f() {", "int[] a = {1,"]
    invalid_code_samples = [")", "}"]
    code_inspect_sample = "Math.max"
    code_clear_output = 'System.out.print("a");\nclearOutput();'
    code_update_display = 'String id = display("v1");\nupdateDisplay(id, "v2");'
    supported_history_operations = ("tail", "range", "search")
    code_history_pattern = "6 ? 7"


def languages(base=Gateway):
    """Every language's class, however deep."""
    for case in base.__subclasses__():
        yield case
        yield from languages(case)


if __name__ == "__main__":
    jkt.TIMEOUT = TIMEOUT
    loader = unittest.TestLoader()
    suite = unittest.TestSuite(loader.loadTestsFromTestCase(case) for case in languages())
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    ok = result.wasSuccessful() and result.testsRun > 0
    print(f"{'ok' if ok else 'FAILED'}: jupyter_kernel_test through the gateway, "
          f"{result.testsRun} tests, {len(result.skipped)} skipped (no sample for them)")
    sys.exit(0 if ok else 1)
