"""A kernel, as jupyter_client starts one, that is runcell's Jupyter gateway
(test-only): started from a kernel spec's argv with a connection file, it
binds the file's five ZeroMQ sockets, starts a kernel of the gateway's
through its REST API, and relays every message between the sockets and
that kernel's `/api/kernels/{id}/channels` WebSocket, as a front end's
server would. So a client of the ZeroMQ protocol (jupyter_kernel_test)
exercises the gateway exactly as a notebook front end does.

Usage (a kernel spec's argv):
    python gateway_bridge.py <runcell /jupyter URL> <API key> <kernel name> -f <connection file>

What is relayed is never changed but for the framing: a client's message
goes up as the gateway's JSON (header, parent_header, metadata, content,
channel); the gateway's frames come down signed with the connection's
key, replies to the socket identity that asked. The kernel is shut down
through the gateway when the bridge ends.
"""

import argparse
import hashlib
import hmac
import json
import queue
import signal
import sys
import threading
import urllib.request

import websocket
import zmq

DELIMITER = b"<IDS|MSG>"


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("key")
    parser.add_argument("kernel")
    parser.add_argument("-f", dest="connection_file", required=True)
    return parser.parse_args()


class Gateway:
    """The gateway's REST API, as the key's caller."""

    def __init__(self, url, key):
        self.url, self.key = url.rstrip("/"), key

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.url}{path}", data=data, method=method,
            headers={"Authorization": f"token {self.key}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            text = response.read()
            return json.loads(text) if text else None

    def channels(self, kernel_id):
        ws_url = self.url.replace("http://", "ws://", 1).replace("https://", "wss://", 1)
        return websocket.create_connection(
            f"{ws_url}/api/kernels/{kernel_id}/channels",
            header=[f"Authorization: token {self.key}"], timeout=None)


class Signer:
    def __init__(self, key, scheme):
        self.key = key.encode()
        self.digest = getattr(hashlib, scheme.split("-", 1)[1]) if self.key else None

    def sign(self, parts):
        if not self.digest:
            return b""
        mac = hmac.new(self.key, digestmod=self.digest)
        for part in parts:
            mac.update(part)
        return mac.hexdigest().encode()


def main():
    args = parse_args()
    with open(args.connection_file) as f:
        info = json.load(f)
    signer = Signer(info.get("key", ""), info.get("signature_scheme", "hmac-sha256"))
    gateway = Gateway(args.url, args.key)
    kernel = gateway.call("POST", "/api/kernels", {"name": args.kernel})
    kernel_id = kernel["id"]
    ws = gateway.channels(kernel_id)

    context = zmq.Context()
    address = f"{info.get('transport', 'tcp')}://{info['ip']}"

    def bind(kind, port):
        socket = context.socket(kind)
        socket.linger = 0
        socket.bind(f"{address}:{port}")
        return socket

    sockets = {
        "shell": bind(zmq.ROUTER, info["shell_port"]),
        "control": bind(zmq.ROUTER, info["control_port"]),
        "stdin": bind(zmq.ROUTER, info["stdin_port"]),
        "iopub": bind(zmq.PUB, info["iopub_port"]),
    }
    heartbeat = bind(zmq.REP, info["hb_port"])
    # Who asked each request (by its msg_id), for the reply's identity.
    askers = {}
    downward = queue.Queue()
    done = threading.Event()

    def read_gateway():
        try:
            while not done.is_set():
                frame = ws.recv()
                if not frame:
                    break
                downward.put(frame)
        except (websocket.WebSocketException, OSError):
            pass
        done.set()

    threading.Thread(target=read_gateway, daemon=True).start()

    def stop(*_):
        done.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    shutting_down = threading.Event()

    def up(channel, frames):
        """A client's message to the gateway."""
        at = frames.index(DELIMITER)
        identities = frames[:at]
        signature, header, parent, metadata, content = frames[at + 1:at + 6]
        if signer.sign([header, parent, metadata, content]) != signature:
            print("bridge: a message with a bad signature is dropped", file=sys.stderr)
            return
        header = json.loads(header)
        askers[header["msg_id"]] = identities
        ws.send(json.dumps({
            "header": header,
            "parent_header": json.loads(parent),
            "metadata": json.loads(metadata),
            "content": json.loads(content),
            "buffers": [],
            "channel": channel,
        }))
        if header["msg_type"] == "shutdown_request" and not json.loads(content).get("restart"):
            shutting_down.set()

    def down(frame):
        """The gateway's message to the client."""
        message = json.loads(frame)
        channel = message.get("channel", "iopub")
        parts = [json.dumps(message.get(part) or {}).encode()
                 for part in ("header", "parent_header", "metadata", "content")]
        header = message["header"]
        if channel == "iopub":
            identities = [f"kernel.{kernel_id}.{header['msg_type']}".encode()]
        else:
            parent_id = (message.get("parent_header") or {}).get("msg_id")
            identities = askers.pop(parent_id, None)
            if identities is None:
                return
        socket = sockets.get(channel)
        if socket is None:
            return
        socket.send_multipart(identities + [DELIMITER, signer.sign(parts)] + parts)
        if shutting_down.is_set() and header["msg_type"] == "shutdown_reply" and channel == "control":
            done.set()

    poller = zmq.Poller()
    for socket in [*sockets.values(), heartbeat]:
        if socket.type != zmq.PUB:
            poller.register(socket, zmq.POLLIN)
    names = {socket: name for name, socket in sockets.items()}
    try:
        while not done.is_set():
            for socket, _ in poller.poll(5):
                frames = socket.recv_multipart()
                if socket is heartbeat:
                    heartbeat.send_multipart(frames)
                else:
                    up(names[socket], frames)
            while True:
                try:
                    down(downward.get_nowait())
                except queue.Empty:
                    break
    finally:
        done.set()
        try:
            ws.close()
        except (websocket.WebSocketException, OSError):
            pass
        try:
            gateway.call("DELETE", f"/api/kernels/{kernel_id}")
        except OSError:
            pass
        for socket in [*sockets.values(), heartbeat]:
            socket.close(0)
        context.term()


if __name__ == "__main__":
    main()
