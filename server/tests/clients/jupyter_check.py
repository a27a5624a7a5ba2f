"""Jupyter's own clients on runcell's kernel gateway.

Usage: jupyter_check.py <runcell /jupyter URL> <API key>

1. jupyter_server (the server JupyterLab runs) started in gateway mode,
   pointed at runcell: a kernel started through it, cells executed over its
   kernel WebSocket (state kept, a PNG, an error, an interrupted
   `while True`), restarted, shut down.
2. nbclient executing a notebook through jupyter_server's gateway kernel
   manager, straight at runcell; the result validated by nbformat.
3. Open WebUI's Jupyter engine's way: a kernel per run, `?token=`, one
   execute_request, read until idle (its ~40 lines re-done here: installing
   Open WebUI itself takes gigabytes).

Prints `ok: ...` after each step; exits non-zero at the first failure.
"""

import asyncio
import functools
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid

import nbformat
import websocket
from nbformat.v4 import new_code_cell, new_notebook, output_from_msg

RUNCELL, KEY = sys.argv[1].rstrip("/"), sys.argv[2]


def ok(what):
    print(f"ok: {what}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- 1. jupyter_server in gateway mode ------------------------------------

JS_TOKEN = uuid.uuid4().hex


def start_jupyter_server(port):
    tmp = tempfile.mkdtemp(prefix="runcell-js-")
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=os.path.join(tmp, "cfg"),
        JUPYTER_RUNTIME_DIR=os.path.join(tmp, "rt"),
        JUPYTER_DATA_DIR=os.path.join(tmp, "data"),
    )
    log = open(os.path.join(tmp, "log"), "w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root",
         "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
         f"--IdentityProvider.token={JS_TOKEN}", f"--ServerApp.root_dir={tmp}",
         f"--gateway-url={RUNCELL}", f"--GatewayClient.auth_token={KEY}",
         "--GatewayClient.connect_timeout=20", "--GatewayClient.request_timeout=120"],
        env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            js_api(port, "GET", "/api")
            return proc, log
        except (urllib.error.URLError, ConnectionError):
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError("jupyter_server stopped:\n" + log.read())
            time.sleep(0.3)
    proc.kill()
    raise TimeoutError("jupyter_server did not start")


def js_api(port, method, path, body=None):
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"token {JS_TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        raw = response.read()
        return response.status, (json.loads(raw) if raw else None)


def message(session, msg_type, content, channel="shell"):
    return {"header": {"msg_id": uuid.uuid4().hex, "msg_type": msg_type, "username": "test",
                       "session": session, "version": "5.3", "date": ""},
            "parent_header": {}, "metadata": {}, "content": content,
            "channel": channel, "buffers": []}


def execute(code):
    return {"code": code, "silent": False, "store_history": True, "user_expressions": {},
            "allow_stdin": False, "stop_on_error": True}


def ask(ws, session, msg_type, content, channel="shell", timeout=120, during=None):
    """Sends a request; its reply and its outputs (as nbformat has them),
    once both the reply and iopub's idle for it are in."""
    request = message(session, msg_type, content, channel)
    ws.send(json.dumps(request))
    if during:
        during()
    reply, outputs, idle, statuses = None, [], False, []
    ws.settimeout(timeout)
    while reply is None or not idle:
        m = json.loads(ws.recv())
        if (m.get("parent_header") or {}).get("msg_id") != request["header"]["msg_id"]:
            continue
        kind = m["header"]["msg_type"]
        if m["channel"] in ("shell", "control") and kind.endswith("_reply"):
            reply = m["content"]
        elif m["channel"] == "iopub":
            if kind == "status":
                statuses.append(m["content"]["execution_state"])
                idle = statuses[-1] == "idle"
            elif kind in ("stream", "display_data", "execute_result", "error"):
                outputs.append(output_from_msg(m))
    assert statuses[0] == "busy", statuses
    return reply, outputs


def through_jupyter_server():
    port = free_port()
    proc, log = start_jupyter_server(port)
    try:
        _, specs = js_api(port, "GET", "/api/kernelspecs")
        assert specs["default"] == "python3" and "python3" in specs["kernelspecs"], specs
        ok("jupyter_server lists runcell's kernel spec")
        status, kernel = js_api(port, "POST", "/api/kernels", {"name": "python3"})
        assert status == 201, (status, kernel)
        kid = kernel["id"]
        ok("a kernel started through jupyter_server")
        session = uuid.uuid4().hex
        ws = websocket.create_connection(
            f"ws://127.0.0.1:{port}/api/kernels/{kid}/channels?session_id={session}",
            header=[f"Authorization: token {JS_TOKEN}"], timeout=120)
        info, _ = ask(ws, session, "kernel_info_request", {})
        assert info["status"] == "ok" and info["language_info"]["name"] == "python", info
        ok("kernel_info through jupyter_server's socket")

        reply, outs = ask(ws, session, "execute_request", execute("x = 41\nprint('set')"))
        assert reply["status"] == "ok" and reply["execution_count"] == 1, reply
        assert outs == [{"output_type": "stream", "name": "stdout", "text": "set\n"}], outs
        reply, outs = ask(ws, session, "execute_request", execute("x + 1"))
        assert reply["execution_count"] == 2, reply
        assert outs[0]["output_type"] == "execute_result", outs
        assert outs[0]["data"]["text/plain"] == "42" and outs[0]["execution_count"] == 2, outs
        ok("state is kept between cells (x + 1 == 42)")

        reply, outs = ask(ws, session, "execute_request", execute(
            "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()"))
        assert reply["status"] == "ok", reply
        pngs = [o for o in outs if o["output_type"] == "display_data" and "image/png" in o["data"]]
        assert pngs, outs
        ok("a PNG display_data")

        reply, outs = ask(ws, session, "execute_request", execute("1/0"))
        assert reply["status"] == "error" and reply["ename"] == "ZeroDivisionError", reply
        assert outs[-1]["output_type"] == "error" and outs[-1]["ename"] == "ZeroDivisionError", outs
        ok("an error, with its name")

        def interrupt_soon():
            def later():
                time.sleep(3)
                assert js_api(port, "POST", f"/api/kernels/{kid}/interrupt")[0] == 204
            threading.Thread(target=later, daemon=True).start()

        started = time.time()
        reply, outs = ask(ws, session, "execute_request",
                          execute("print('looping', flush=True)\nwhile True:\n    pass"),
                          during=interrupt_soon)
        assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
        assert time.time() - started < 60, "the interrupt took too long"
        reply, outs = ask(ws, session, "execute_request", execute("x"))
        assert outs[0]["data"]["text/plain"] == "41", outs
        ok("an interrupted `while True` stops and the kernel goes on")

        status, model = js_api(port, "POST", f"/api/kernels/{kid}/restart")
        assert status == 200 and model["id"] == kid, (status, model)
        reply, outs = ask(ws, session, "execute_request", execute("x"))
        assert reply["status"] == "error" and reply["ename"] == "NameError", reply
        assert reply["execution_count"] == 1, reply
        ok("a restart forgets the variables and counts from 1 again")
        ws.close()

        assert js_api(port, "DELETE", f"/api/kernels/{kid}")[0] == 204
        _, kernels = js_api(port, "GET", "/api/kernels")
        assert all(k["id"] != kid for k in kernels), kernels
        ok("the kernel shut down")
    except BaseException:
        log.seek(0)
        print("jupyter_server's log:\n" + log.read()[-6000:], file=sys.stderr)
        raise
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# --- 2. nbclient through the gateway kernel manager ------------------------

def through_nbclient():
    from jupyter_server.gateway.gateway_client import GatewayClient
    from jupyter_server.gateway.managers import GatewayKernelClient, GatewayKernelManager
    from nbclient import NotebookClient

    class AuthGatewayKernelClient(GatewayKernelClient):
        """Its socket is opened without the credential (jupyter_server
        2.x): add the header GatewayClient sends on every request."""

        async def start_channels(self, *args, **kwargs):
            gw = GatewayClient.instance()
            original = websocket.create_connection
            websocket.create_connection = functools.partial(
                original, header=[f"{gw.auth_header_key}: {gw.auth_scheme} {gw.auth_token}"])
            try:
                await super().start_channels(*args, **kwargs)
            finally:
                websocket.create_connection = original

    nb = new_notebook()
    nb.cells = [
        new_code_cell("import pandas as pd\ndf = pd.DataFrame({'n': [1, 2, 3]})"),
        new_code_cell("print(df['n'].sum() * 7)"),
        new_code_cell("df"),
        new_code_cell("import matplotlib.pyplot as plt\ndf.plot()\nplt.show()"),
    ]
    GatewayClient.clear_instance()
    GatewayClient.instance(url=RUNCELL, auth_token=KEY, auth_scheme="token")
    km = GatewayKernelManager(owns_kernel=False, client_factory=AuthGatewayKernelClient)
    client = NotebookClient(nb, km=km, timeout=120, startup_timeout=120, kernel_name="python3")
    try:
        client.execute(kernel_name="python3")
    finally:
        if client.kc is not None:
            client.kc.stop_channels()
        if km.has_kernel:
            asyncio.run(km.shutdown_kernel())
    nbformat.validate(nb)
    assert nb.cells[1].outputs[0]["text"] == "42\n", nb.cells[1].outputs
    assert "text/html" in nb.cells[2].outputs[0]["data"], nb.cells[2].outputs
    assert any("image/png" in o.get("data", {}) for o in nb.cells[3].outputs), nb.cells[3].outputs
    assert [c.execution_count for c in nb.cells] == [1, 2, 3, 4]
    ok("nbclient ran a notebook through the gateway; nbformat validates it")


# --- 3. Open WebUI's Jupyter engine's way -----------------------------------

def like_open_webui():
    request = urllib.request.Request(f"{RUNCELL}/api/kernels?token={KEY}", method="POST")
    with urllib.request.urlopen(request, timeout=60) as response:
        kid = json.loads(response.read())["id"]
    ws_url = RUNCELL.replace("http", "ws", 1)
    ws = websocket.create_connection(f"{ws_url}/api/kernels/{kid}/channels?token={KEY}", timeout=60)
    msg_id = uuid.uuid4().hex
    ws.send(json.dumps({
        "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "user",
                   "session": uuid.uuid4().hex, "date": "", "version": "5.3"},
        "parent_header": {}, "metadata": {},
        "content": {"code": "print(sum(range(10)))\n'done'", "silent": False,
                    "store_history": True, "user_expressions": {}, "allow_stdin": False,
                    "stop_on_error": True},
        "channel": "shell"}))
    stdout, result = "", None
    while True:
        m = json.loads(ws.recv())
        if m.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        kind = m.get("msg_type")
        if kind == "stream":
            stdout += m["content"]["text"]
        elif kind == "execute_result":
            result = m["content"]["data"]["text/plain"]
        elif kind == "status" and m["content"]["execution_state"] == "idle":
            break
    ws.close()
    request = urllib.request.Request(f"{RUNCELL}/api/kernels/{kid}?token={KEY}", method="DELETE")
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 204
    assert stdout == "45\n" and result == "'done'", (stdout, result)
    ok("Open WebUI's way (?token=, a kernel per run, read to idle)")


through_jupyter_server()
through_nbclient()
like_open_webui()
print("all jupyter clients passed", flush=True)
