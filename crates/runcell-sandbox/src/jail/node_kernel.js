// runcell's JavaScript and TypeScript kernel: a Jupyter kernel for Node,
// run in a session's jail and driven by the server's own ZMTP client over
// `ipc` sockets, exactly as the Python kernel is.
//
// Why our own: the maintained Node kernels (tslab, ijavascript) need the
// `zeromq` addon, whose prebuilt binaries are not on the registries. What a
// kernel needs of ZeroMQ here is small (one peer per socket, the NULL
// mechanism, framing), so it is written below. Cells are evaluated through
// V8's own REPL mode (the inspector's `Runtime.evaluate` with `replMode`, as
// Chrome's console does): `let`/`const` may be declared again, `await` works
// at the top level and the last expression is the cell's value. TypeScript
// is type-stripped by sucrase (line numbers kept) before it runs; ESM
// `import`s become `require`s.
//
// Usage: node node_kernel.js -f CONNECTION_FILE [--typescript] [--cwd DIR]
'use strict';

const net = require('net');
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const util = require('util');
const inspector = require('inspector');
const { Worker, isMainThread, parentPort, workerData } = require('worker_threads');

// Nothing the kernel loads comes from the session's home. Node looks for a
// package it finds nowhere beside the requiring file in `~/.node_modules`
// and `~/.node_libraries` too (its global folders, taken from HOME as it
// starts), where a cell could have put one named after a package sucrase
// requires: they are dropped, so the kernel's own packages come only from
// /opt/runcell/node. Cells still require from the working directory's
// `node_modules`, as a script there would. (The control thread loads only
// Node's own modules.)
if (isMainThread) {
  const home = process.env.HOME;
  delete process.env.HOME;
  require('module')._initPaths();
  if (home !== undefined) process.env.HOME = home;
}

// ---------------------------------------------------------------- ZMTP 3.0

// The largest frame accepted from the server: requests are small (a cell is
// at most 1 MiB of code).
const MAX_FRAME = 8 * 1024 * 1024;
const MAX_FRAMES = 32;

function greeting() {
  const g = Buffer.alloc(64);
  g[0] = 0xff;
  g[9] = 0x7f;
  g[10] = 3;
  g[11] = 0;
  g.write('NULL', 12, 'latin1');
  return g;
}

function frameHeader(flags, length) {
  if (length > 255) {
    const h = Buffer.alloc(9);
    h[0] = flags | 0x02;
    h.writeBigUInt64BE(BigInt(length), 1);
    return h;
  }
  return Buffer.from([flags, length]);
}

function readyCommand(socketType) {
  const name = Buffer.from('Socket-Type', 'latin1');
  const value = Buffer.from(socketType, 'latin1');
  const len = Buffer.alloc(4);
  len.writeUInt32BE(value.length);
  const body = Buffer.concat([
    Buffer.from([5]), Buffer.from('READY', 'latin1'),
    Buffer.from([name.length]), name, len, value,
  ]);
  return Buffer.concat([frameHeader(0x04, body.length), body]);
}

// One peer's connection: greets, then hands whole multipart messages to
// `onMessage` and subscriptions to `onSubscribe`.
class Peer {
  constructor(socket, socketType, onMessage, onSubscribe) {
    this.socket = socket;
    this.onMessage = onMessage;
    this.onSubscribe = onSubscribe;
    this.buf = Buffer.alloc(0);
    this.greeted = false;
    this.parts = [];
    this.subscribed = false;
    socket.on('data', (chunk) => this.data(chunk));
    socket.on('error', () => socket.destroy());
    socket.write(Buffer.concat([greeting(), readyCommand(socketType)]));
  }

  data(chunk) {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    try {
      this.decode();
    } catch (e) {
      this.socket.destroy();
    }
  }

  decode() {
    if (!this.greeted) {
      if (this.buf.length < 64) return;
      if (this.buf[0] !== 0xff || this.buf[9] !== 0x7f || this.buf[10] < 3) {
        throw new Error('bad greeting');
      }
      this.buf = this.buf.subarray(64);
      this.greeted = true;
    }
    for (;;) {
      if (this.buf.length < 2) return;
      const flags = this.buf[0];
      let length;
      let header;
      if (flags & 0x02) {
        if (this.buf.length < 9) return;
        const big = this.buf.readBigUInt64BE(1);
        if (big > BigInt(MAX_FRAME)) throw new Error('frame too large');
        length = Number(big);
        header = 9;
      } else {
        length = this.buf[1];
        header = 2;
      }
      if (length > MAX_FRAME) throw new Error('frame too large');
      if (this.buf.length < header + length) return;
      const body = Buffer.from(this.buf.subarray(header, header + length));
      this.buf = this.buf.subarray(header + length);
      if (flags & 0x04) {
        // READY, PING, SUBSCRIBE (ZMTP 3.1): only a subscription matters.
        const nameLength = body[0] || 0;
        const name = body.subarray(1, 1 + nameLength).toString('latin1');
        if (name === 'SUBSCRIBE') this.subscribe();
        continue;
      }
      this.parts.push(body);
      if (this.parts.length > MAX_FRAMES) throw new Error('too many frames');
      if (!(flags & 0x01)) {
        const parts = this.parts;
        this.parts = [];
        if (this.onSubscribe && parts.length === 1 && parts[0][0] === 1) {
          this.subscribe();
        } else if (this.onMessage) {
          this.onMessage(this, parts);
        }
      }
    }
  }

  subscribe() {
    this.subscribed = true;
    if (this.onSubscribe) this.onSubscribe(this);
  }

  send(frames) {
    const out = [];
    frames.forEach((frame, i) => {
      out.push(frameHeader(i < frames.length - 1 ? 0x01 : 0, frame.length), frame);
    });
    this.socket.write(Buffer.concat(out));
  }
}

// A listening socket of one type at `address` (`{path}` or `{host, port}`).
function listen(address, socketType, onMessage, onSubscribe) {
  const peers = new Set();
  const server = net.createServer((socket) => {
    const peer = new Peer(socket, socketType, onMessage, onSubscribe);
    peers.add(peer);
    socket.on('close', () => peers.delete(peer));
  });
  server.listen(address);
  return peers;
}

// ----------------------------------------------------- Jupyter messages

const DELIMITER = Buffer.from('<IDS|MSG>', 'latin1');

function wire(connection) {
  const key = Buffer.from(connection.key || '', 'utf8');
  const session = crypto.randomUUID();
  const sign = (parts) => {
    if (!key.length) return '';
    const mac = crypto.createHmac('sha256', key);
    for (const part of parts) mac.update(part);
    return mac.digest('hex');
  };
  return {
    // A message's frames, after `prefix` (identities or a topic).
    encode(prefix, type, content, parent) {
      const header = {
        msg_id: crypto.randomUUID(),
        session,
        username: 'kernel',
        date: new Date().toISOString(),
        msg_type: type,
        version: '5.3',
      };
      const parts = [header, parent || {}, {}, content].map((p) => Buffer.from(JSON.stringify(p), 'utf8'));
      return [...prefix, DELIMITER, Buffer.from(sign(parts), 'latin1'), ...parts];
    },
    // A verified message, or null.
    decode(frames) {
      const at = frames.findIndex((f) => f.equals(DELIMITER));
      if (at < 0 || frames.length - at - 1 < 5) return null;
      const parts = frames.slice(at + 2, at + 6);
      const expected = Buffer.from(sign(parts), 'latin1');
      const got = frames[at + 1];
      if (key.length && (got.length !== expected.length || !crypto.timingSafeEqual(got, expected))) {
        return null;
      }
      try {
        const [header, parent, metadata, content] = parts.map((p) => JSON.parse(p.toString('utf8')));
        return { identities: frames.slice(0, at), header, parent, metadata, content };
      } catch (e) {
        return null;
      }
    },
  };
}

// Where a socket listens: an `ipc` path as libzmq names it (`<ip>-<port>`),
// as runcell's jails use, or TCP (as Jupyter's own tools start kernels).
function socketPath(connection, port) {
  if (connection.transport === 'tcp') return { host: connection.ip, port };
  return { path: `${connection.ip}-${port}` };
}

function arg(name) {
  const at = process.argv.indexOf(name);
  return at >= 0 ? process.argv[at + 1] : undefined;
}

const typescript = process.argv.includes('--typescript');
const language = typescript ? 'typescript' : 'javascript';

function info() {
  return {
    status: 'ok',
    protocol_version: '5.3',
    implementation: 'runcell-node',
    implementation_version: '1.0',
    language_info: {
      name: language,
      version: process.versions.node,
      mimetype: typescript ? 'text/typescript' : 'text/javascript',
      file_extension: typescript ? '.ts' : '.js',
      pygments_lexer: language,
      codemirror_mode: language,
      nbconvert_exporter: 'script',
    },
    banner: `runcell ${language} kernel (Node ${process.version})`,
    help_links: [],
  };
}

// The state shared with the control thread: [what runs now, its number].
const IDLE = 0;
const SYNC = 1; // a cell's synchronous part is running
const STOPPING = 2; // ... and is being terminated
const ASYNC = 3; // a cell is awaiting

// ------------------------------------------------------- control thread

if (!isMainThread) {
  const { connectionFile, state: stateBuffer } = workerData;
  const state = new Int32Array(stateBuffer);
  const connection = JSON.parse(fs.readFileSync(connectionFile, 'utf8'));
  const w = wire(connection);
  const debug = new inspector.Session();
  debug.connectToMainThread();
  listen(socketPath(connection, connection.control_port), 'ROUTER', (peer, frames) => {
    const m = w.decode(frames);
    if (!m) return;
    const type = m.header.msg_type;
    if (type === 'interrupt_request') {
      const cell = Atomics.load(state, 1);
      if (Atomics.compareExchange(state, 0, SYNC, STOPPING) === SYNC) {
        debug.post('Runtime.terminateExecution', {}, () => {});
      }
      parentPort.postMessage({ interrupt: cell });
      peer.send(w.encode(m.identities, 'interrupt_reply', { status: 'ok' }, m.header));
    } else if (type === 'shutdown_request') {
      peer.send(w.encode(m.identities, 'shutdown_reply', { status: 'ok', restart: !!m.content.restart }, m.header));
      setTimeout(() => process.exit(0), 50);
    } else if (type === 'kernel_info_request') {
      peer.send(w.encode(m.identities, 'kernel_info_reply', info(), m.header));
    }
  });
  return;
}

// ---------------------------------------------------------- main thread

// `--run FILE`: run one program as a script and exit (a one-shot run);
// otherwise serve as a kernel.
const runFile = arg('--run');
const connectionFile = arg('-f');
const connection = runFile ? null : JSON.parse(fs.readFileSync(connectionFile, 'utf8'));
const w = runFile ? null : wire(connection);
const kernelId = crypto.randomUUID();
const state = new Int32Array(new SharedArrayBuffer(8));

const cwd = arg('--cwd');
if (cwd) process.chdir(cwd);

// Cells `require` from the working directory, as a script there would.
const { createRequire } = require('module');
const requireFrom = () => createRequire(path.join(process.cwd(), '[cell]'));
Object.defineProperty(globalThis, 'require', {
  configurable: true,
  get: requireFrom,
});

const iopub = runFile ? new Set() : listen(socketPath(connection, connection.iopub_port), 'PUB', null, () => {});
let current = null; // the cell running: {parent, count, done}
let executionCount = 0;

function publish(type, content, parent) {
  const frames = w.encode([Buffer.from(`kernel.${kernelId}.${type}`, 'latin1')], type, content, parent);
  for (const peer of iopub) {
    if (peer.subscribed) peer.send(frames);
  }
}

// What a cell prints goes to the cell that is running (or, after it ended,
// to the last one, as ipykernel does with output from background tasks).
let lastParent = null;
for (const name of runFile ? [] : ['stdout', 'stderr']) {
  const stream = process[name];
  stream.write = function write(chunk, encoding, callback) {
    const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    const parent = current ? current.parent : lastParent;
    if (parent && text.length) publish('stream', { name, text }, parent);
    if (typeof encoding === 'function') encoding();
    else if (typeof callback === 'function') callback();
    return true;
  };
}

// Values shown as the page shows them: strings as they are, the rest as
// Node's REPL prints them.
function plain(value) {
  if (typeof value === 'string') return value;
  return util.inspect(value, { depth: 4, maxArrayLength: 200, maxStringLength: 10000, breakLength: 100 });
}

// A value with its own MIME bundle (`{[Symbol.for('runcell.mime')]: () => bundle}`
// or the Jupyter-ish `_toMime()`), for HTML, SVG, images and charts.
function bundle(value) {
  const data = { 'text/plain': plain(value) };
  try {
    const own = value && typeof value === 'object' && typeof value._toMime === 'function' ? value._toMime() : null;
    if (own && typeof own === 'object') Object.assign(data, own);
  } catch (e) {
    // its text stands
  }
  return data;
}

// `display(value)` and `display.html(...)`, `display.svg(...)`,
// `display.markdown(...)`, `display.png(base64)`, `display.json(...)`.
function display(value) {
  const parent = current ? current.parent : lastParent;
  if (parent) publish('display_data', { data: bundle(value), metadata: {}, transient: {} }, parent);
}
const shown = (mime) => (content) => {
  const parent = current ? current.parent : lastParent;
  if (parent) publish('display_data', { data: { [mime]: content, 'text/plain': `<${mime}>` }, metadata: {}, transient: {} }, parent);
};
display.html = shown('text/html');
display.svg = shown('image/svg+xml');
display.markdown = shown('text/markdown');
display.png = shown('image/png');
display.jpeg = shown('image/jpeg');
display.json = shown('application/json');
globalThis.display = display;

const debug = new inspector.Session();
debug.connect();
function post(method, params) {
  return new Promise((resolve, reject) => {
    debug.post(method, params, (error, result) => (error ? reject(error) : resolve(result)));
  });
}

// The value a remote object stands for, in this process.
async function valueOf(remote) {
  if (!remote) return undefined;
  if (remote.objectId) {
    await post('Runtime.callFunctionOn', {
      objectId: remote.objectId,
      functionDeclaration: 'function () { globalThis[Symbol.for("runcell.last")] = this; }',
    });
    const value = globalThis[Symbol.for('runcell.last')];
    delete globalThis[Symbol.for('runcell.last')];
    return value;
  }
  if (remote.type === 'undefined') return undefined;
  if (remote.type === 'bigint') return BigInt(String(remote.unserializableValue).replace(/n$/, ''));
  if ('unserializableValue' in remote) return Number(remote.unserializableValue);
  return remote.value;
}

// A stack without the kernel's own frames (those below the cell's).
function traceback(error) {
  const lines = (error && error.stack ? String(error.stack) : String(error)).split('\n');
  let end = lines.findIndex((line) => /node:inspector|node_kernel\.js|processTicksAndRejections/.test(line));
  if (end < 0) end = lines.length;
  if (end > 0 && /^\s*at new Promise \(<anonymous>\)$/.test(lines[end - 1])) end -= 1;
  return lines.slice(0, end).join('\n');
}

let sucrase = null;
function compile(code) {
  const esm = /^\s*(import\s+[\w{*'"]|export\s)/m.test(code);
  if (!typescript && !esm) return code;
  if (!sucrase) {
    try {
      sucrase = require('/opt/runcell/node/node_modules/sucrase');
    } catch (e) {
      throw new Error('TypeScript and import statements need sucrase in /opt/runcell/node: run scripts/setup.sh');
    }
  }
  const transforms = typescript ? ['typescript'] : [];
  if (esm) transforms.push('imports');
  let out = sucrase.transform(code, { transforms, disableESTransforms: true, keepUnusedImports: true }).code;
  // The imports transform marks the code strict; a cell's top level is not.
  out = out.replace(/^"use strict";/, '');
  // `import x from "npm:x"` (Deno's spelling, which E2B's examples use).
  return out.replace(/require\((['"])npm:/g, 'require($1');
}

async function evaluate(code) {
  const cell = Atomics.add(state, 1, 1) + 1;
  let source;
  try {
    source = compile(code);
  } catch (e) {
    // Its position is in the message; the kernel's frames say nothing.
    const error = e instanceof Error ? e : new Error(String(e));
    if (!(error instanceof SyntaxError) && /Unexpected|Expected|\(\d+:\d+\)/.test(error.message)) {
      error.name = 'SyntaxError';
    }
    error.stack = `${error.name}: ${error.message}`;
    return { error };
  }
  Atomics.store(state, 0, SYNC);
  const pending = post('Runtime.evaluate', {
    expression: source,
    replMode: true,
    awaitPromise: true,
    objectGroup: 'cells',
  });
  // The synchronous part ran inside `post`; from here a cell only awaits.
  Atomics.compareExchange(state, 0, SYNC, ASYNC);
  const interrupted = new Promise((resolve) => {
    if (current) {
      current.interrupt = (n) => {
        if (n === cell) resolve({ interrupted: true });
      };
    }
  });
  let outcome;
  try {
    outcome = await Promise.race([pending, interrupted]);
  } catch (e) {
    outcome = /terminated/i.test(String(e && e.message)) ? { interrupted: true } : { error: e };
  }
  Atomics.store(state, 0, IDLE);
  if (outcome.interrupted || outcome.error) return outcome;
  if (outcome.exceptionDetails) {
    const thrown = await valueOf(outcome.exceptionDetails.exception).catch(() => undefined);
    return { error: thrown === undefined ? new Error(outcome.exceptionDetails.text) : thrown };
  }
  return { value: await valueOf(outcome.result).catch(() => undefined), hasValue: outcome.result && outcome.result.type !== 'undefined' };
}

function errorContent(error) {
  if (error && error.interrupted) {
    return { ename: 'Interrupted', evalue: 'the cell was interrupted', traceback: [] };
  }
  const ename = (error && error.name) || 'Error';
  const evalue = error && error.message !== undefined ? String(error.message) : plain(error);
  return { ename, evalue, traceback: [traceback(error)] };
}

const queue = [];
let running = false;
async function drain() {
  running = true;
  while (queue.length) {
    const { peer, m } = queue.shift();
    try {
      await handle(peer, m);
    } catch (e) {
      fs.writeSync(2, `kernel: ${e && e.stack}\n`);
    }
  }
  running = false;
}

async function handle(peer, m) {
  const type = m.header.msg_type;
  const reply = (replyType, content) => peer.send(w.encode(m.identities, replyType, content, m.header));
  publish('status', { execution_state: 'busy' }, m.header);
  try {
    if (type === 'kernel_info_request') {
      reply('kernel_info_reply', info());
    } else if (type === 'execute_request') {
      const silent = !!m.content.silent;
      const count = silent ? executionCount : ++executionCount;
      current = { parent: m.header, interrupt: () => {} };
      lastParent = m.header;
      if (!silent) publish('execute_input', { code: m.content.code, execution_count: count }, m.header);
      const outcome = await evaluate(String(m.content.code || ''));
      if (outcome.error !== undefined || outcome.interrupted) {
        const content = errorContent(outcome.interrupted ? outcome : outcome.error);
        publish('error', content, m.header);
        reply('execute_reply', { status: 'error', execution_count: count, ...content });
      } else {
        if (outcome.hasValue && !silent) {
          publish('execute_result', { execution_count: count, data: bundle(outcome.value), metadata: {} }, m.header);
        }
        reply('execute_reply', { status: 'ok', execution_count: count, payload: [], user_expressions: {} });
      }
      current = null;
    } else if (type === 'is_complete_request') {
      reply('is_complete_reply', { status: 'unknown' });
    } else if (type === 'complete_request') {
      const at = Number(m.content.cursor_pos) || 0;
      reply('complete_reply', { status: 'ok', matches: [], cursor_start: at, cursor_end: at, metadata: {} });
    } else if (type === 'inspect_request') {
      reply('inspect_reply', { status: 'ok', found: false, data: {}, metadata: {} });
    } else if (type === 'history_request') {
      reply('history_reply', { status: 'ok', history: [] });
    } else if (type === 'comm_info_request') {
      reply('comm_info_reply', { status: 'ok', comms: {} });
    } else if (type === 'shutdown_request') {
      reply('shutdown_reply', { status: 'ok', restart: !!m.content.restart });
      setTimeout(() => process.exit(0), 50);
    }
  } finally {
    publish('status', { execution_state: 'idle' }, m.header);
  }
}

// One program, then exit: its errors as Node prints them, exit status 1.
async function runOnce(file) {
  const outcome = await evaluate(fs.readFileSync(file, 'utf8'));
  debug.disconnect();
  if (outcome.error !== undefined) {
    process.stderr.write(`${traceback(outcome.error)}\n`);
    process.exitCode = 1;
  } else if (outcome.interrupted) {
    process.exitCode = 130;
  }
}

if (runFile) {
  runOnce(runFile);
} else {
  const shell = listen(socketPath(connection, connection.shell_port), 'ROUTER', (peer, frames) => {
    const m = w.decode(frames);
    if (m) queue.push({ peer, m });
    if (!running) drain();
  }, null);

  const control = new Worker(__filename, {
    workerData: { connectionFile, state: state.buffer },
    stdout: false,
    stderr: false,
  });
  control.on('message', (message) => {
    if (message.interrupt !== undefined && current && current.interrupt) current.interrupt(message.interrupt);
  });
  control.on('error', (e) => {
    fs.writeSync(2, `kernel control thread: ${e && e.stack}\n`);
    process.exit(1);
  });

  // A cell's stray rejections and exceptions are reported, not fatal.
  process.on('unhandledRejection', (reason) => {
    process.stderr.write(`Unhandled promise rejection: ${traceback(reason)}\n`);
  });
  process.on('uncaughtException', (error) => {
    process.stderr.write(`Uncaught exception: ${traceback(error)}\n`);
  });
}
