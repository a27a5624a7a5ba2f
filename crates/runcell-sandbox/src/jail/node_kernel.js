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
// `import`s become `require`s. Completion, inspection, `is_complete` and
// history are answered from the cell's text, the compiler and V8's
// side-effect-free evaluation, never by running what a request holds.
//
// Usage: node node_kernel.js -f CONNECTION_FILE [--typescript] [--cwd DIR]
'use strict';

const net = require('net');
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const util = require('util');
const vm = require('vm');
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
    debugger: false,
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

// ------------------------------------- completion, inspection, history

// Completion, `is_complete` and inspection read a cell's text; the only text
// of a request that ever runs is a member chain (`a.b[0].c()`) found in it,
// evaluated by V8 with `throwOnSideEffect` (as Chrome's console previews
// do), so completing `f().x` aborts `f` at its first write, and with a
// timeout, so a loop without side effects ends too. Requests wait in the
// shell queue while a cell runs, so none of this overlaps one.

// JavaScript's tokens as far as these need them: names, literals, brackets,
// with strings, templates, comments and regular expressions stepped over so
// that a bracket in them does not count. Not a parser: a `/` starts a regular
// expression where an operand is expected, as editors guess.
const NAME = /[$_\p{ID_Start}][$\u200c\u200d\p{ID_Continue}]*/uy;
const NAME_ONLY = /^[$_\p{ID_Start}][$\u200c\u200d\p{ID_Continue}]*$/u;
const NAME_REST = /^[$\u200c\u200d\p{ID_Continue}]*/u;
const NUMBER = /(?:0[xXoObB][\da-fA-F_]+|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d+)?)n?/y;
const OPENER = { ')': '(', ']': '[', '}': '{' };
// Words after which an operand comes: a `/` after them starts a regular
// expression, a `(` after them groups rather than calls.
const OPERAND_WORDS = new Set([
  'await', 'case', 'catch', 'delete', 'do', 'else', 'for', 'if', 'in', 'instanceof', 'new',
  'of', 'return', 'switch', 'throw', 'typeof', 'void', 'while', 'with', 'yield',
]);

// `{tokens, open, pairs, end, continued, mismatch}`: `open` holds the indices
// of brackets still open at the end, `pairs` a closing bracket's opener,
// `end` where the text stops ('code', 'string', 'template', 'comment' or
// 'regex'), `continued` a string left open by a trailing backslash,
// `mismatch` a closing bracket that closes nothing of its kind.
function lex(code) {
  const tokens = [];
  const open = [];
  const pairs = new Map();
  let at = 0;
  let end = 'code';
  let continued = false;
  let mismatch = false;
  const push = (type, start, value) => tokens.push({ type, start, end: at, value });
  // Where `pattern` (sticky) stops matching from `from`, or -1.
  const matchEnd = (pattern, from) => {
    pattern.lastIndex = from;
    return pattern.test(code) ? pattern.lastIndex : -1;
  };
  const operandNext = () => {
    const last = tokens[tokens.length - 1];
    if (!last) return true;
    if (last.type === 'name') return OPERAND_WORDS.has(last.value);
    return last.type === 'punct' && last.value !== ')' && last.value !== ']';
  };
  // A template's text from `at` to its closing backtick or its next `${`.
  const template = (start) => {
    while (at < code.length) {
      const c = code[at];
      if (c === '\\') {
        at += 2;
      } else if (c === '`') {
        at += 1;
        push(code[start] === '`' ? 'template' : 'template-part', start, null);
        return;
      } else if (c === '$' && code[at + 1] === '{') {
        at += 2;
        push('template-part', start, '${');
        open.push(tokens.length - 1);
        return;
      } else {
        at += 1;
      }
    }
    at = code.length;
    end = 'template';
  };
  while (at < code.length && end === 'code') {
    const c = code[at];
    const start = at;
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\u00a0' || c === '\ufeff' || c === '\u2028' || c === '\u2029') {
      at += 1;
    } else if (c === '/' && code[at + 1] === '/') {
      const newline = code.indexOf('\n', at);
      at = newline < 0 ? code.length : newline;
    } else if (c === '/' && code[at + 1] === '*') {
      const close = code.indexOf('*/', at + 2);
      if (close < 0) {
        at = code.length;
        end = 'comment';
      } else {
        at = close + 2;
      }
    } else if (c === '"' || c === "'") {
      at += 1;
      while (at < code.length && code[at] !== c && code[at] !== '\n') at += code[at] === '\\' ? 2 : 1;
      if (at >= code.length) {
        end = 'string';
        continued = at > code.length;
        at = code.length;
      } else {
        if (code[at] === c) at += 1;
        push('string', start, null);
      }
    } else if (c === '`') {
      at += 1;
      template(start);
    } else if (c === '/' && operandNext()) {
      at += 1;
      let inClass = false;
      while (at < code.length && code[at] !== '\n' && (inClass || code[at] !== '/')) {
        if (code[at] === '\\') at += 1;
        else if (code[at] === '[') inClass = true;
        else if (code[at] === ']') inClass = false;
        at += 1;
      }
      if (at >= code.length) {
        at = code.length;
        end = 'regex';
      } else {
        if (code[at] === '/') at += 1;
        at = Math.max(at, matchEnd(NAME, at));
        push('regex', start, null);
      }
    } else if (matchEnd(NAME, c === '#' ? at + 1 : at) > 0) {
      at = NAME.lastIndex;
      push('name', start, code.slice(start, at));
    } else if (/[\d.]/.test(c) && matchEnd(NUMBER, at) > at + (c === '.' ? 1 : 0)) {
      at = NUMBER.lastIndex;
      push('number', start, null);
    } else if (c === '?' && code[at + 1] === '.' && !/\d/.test(code[at + 2] || '')) {
      at += 2;
      push('punct', start, '?.');
    } else if (c === '.' && code[at + 1] === '.' && code[at + 2] === '.') {
      at += 3;
      push('punct', start, '...');
    } else if (c === '(' || c === '[' || c === '{') {
      at += 1;
      push('punct', start, c);
      open.push(tokens.length - 1);
    } else if (c === ')' || c === ']' || c === '}') {
      at += 1;
      const opener = open.length ? tokens[open[open.length - 1]] : null;
      if (c === '}' && opener && opener.value === '${') {
        open.pop();
        template(start);
      } else if (opener && opener.value === OPENER[c]) {
        push('punct', start, c);
        pairs.set(tokens.length - 1, open.pop());
      } else {
        mismatch = true;
        push('punct', start, c);
      }
    } else {
      at += c.codePointAt(0) > 0xffff ? 2 : 1;
      push('punct', start, code.slice(start, at));
    }
  }
  return { tokens, open, pairs, end, continued, mismatch };
}

// The first token of the member chain that ends at token `last`
// (`a.b[c](d).e`, `'s'.length`, `new A(1).b`), or -1.
function chainStart(lexed, last) {
  const { tokens, pairs } = lexed;
  let at = last;
  for (;;) {
    const token = tokens[at];
    if (!token) return -1;
    let first = at;
    if (token.type === 'punct' && (token.value === ')' || token.value === ']')) {
      first = pairs.get(at);
      if (first === undefined) return -1;
      const callee = tokens[first - 1];
      const called = callee && (callee.type === 'name'
        ? !OPERAND_WORDS.has(callee.value)
        : callee.type === 'template' || (callee.type === 'punct' && (callee.value === ')' || callee.value === ']')));
      if (called) {
        at = first - 1;
        continue;
      }
    } else if (!['name', 'number', 'string', 'template', 'regex'].includes(token.type)) {
      return -1;
    }
    const before = tokens[first - 1];
    if (before && before.type === 'punct' && (before.value === '.' || before.value === '?.')) {
      at = first - 2;
      continue;
    }
    if (before && before.value === 'new' && tokens[last].value === ')') return first - 1;
    return first;
  }
}

// A position in code points (as Jupyter counts) as an index into `text`.
function utf16Offset(text, codePoints) {
  let at = 0;
  for (let n = 0; n < codePoints && at < text.length; n += 1) {
    at += text.codePointAt(at) > 0xffff ? 2 : 1;
  }
  return at;
}

// A request's `cursor_pos`, or the end of its code where it has none.
function cursorOf(content) {
  const at = Number(content.cursor_pos);
  return Number.isFinite(at) && at >= 0 ? at : codePointLength(String(content.code || ''));
}

function codePointLength(text) {
  let n = 0;
  for (let at = 0; at < text.length; at += text.codePointAt(at) > 0xffff ? 2 : 1) n += 1;
  return n;
}

const PEEK_GROUP = 'runcell.peek';
const PEEK_TIMEOUT_MS = 1000;
// Replies stay well inside the server's bound on a kernel's reply (1 MiB):
// at most this many names of at most this length, texts of at most this
// many characters. Requests read at most a cell's worth of code.
const MAX_MATCHES = 1000;
const MAX_NAME = 256;
const MAX_TEXT = 20000;
const MAX_READ = 1024 * 1024;

// Evaluates `expression` only if V8 proves it has no side effects; the
// remote result, or null if it threw, had an effect or timed out.
async function peek(expression, options) {
  try {
    const outcome = await post('Runtime.evaluate', {
      expression,
      throwOnSideEffect: true,
      timeout: PEEK_TIMEOUT_MS,
      silent: true,
      objectGroup: PEEK_GROUP,
      ...options,
    });
    return outcome.exceptionDetails ? null : outcome.result;
  } catch (e) {
    return null;
  }
}

// The property names, own and inherited, of the value a function's argument
// is, that start with `partial`; run by `peek`, so on the value's behalf
// only reads happen. An array's, a typed array's or a string's own names are
// its indices (and `length`): they are not listed, so a million items cost
// nothing; other objects are read to their first `scan` names each.
const COLLECT = `function (value, partial, limit, scan) {
  const names = [];
  const seen = new Set();
  if (value === null || value === undefined) return names;
  for (let o = Object(value), depth = 0; o !== null && depth < 64 && names.length < limit; o = Object.getPrototypeOf(o), depth += 1) {
    const indexed = depth === 0 && (Array.isArray(o) || ArrayBuffer.isView(o) || typeof value === 'string');
    const own = indexed ? ['length'] : Object.getOwnPropertyNames(o);
    for (let i = 0; i < own.length && i < scan; i += 1) {
      const name = own[i];
      if (name.startsWith(partial) && !seen.has(name)) {
        seen.add(name);
        names.push(name);
      }
    }
  }
  return names;
}`;

async function propertyNames(expression, partial) {
  const call = `(${COLLECT})((\n${expression}\n), ${JSON.stringify(partial)}, ${4 * MAX_MATCHES}, 50000)`;
  const names = await peek(call, { returnByValue: true });
  return names && Array.isArray(names.value) ? names.value : [];
}

const KEYWORDS = [
  'async', 'await', 'break', 'case', 'catch', 'class', 'const', 'continue', 'debugger', 'default',
  'delete', 'do', 'else', 'export', 'extends', 'false', 'finally', 'for', 'function', 'if', 'import',
  'in', 'instanceof', 'let', 'new', 'null', 'of', 'return', 'static', 'super', 'switch', 'this',
  'throw', 'true', 'try', 'typeof', 'var', 'void', 'while', 'with', 'yield',
];
const TYPESCRIPT_KEYWORDS = [
  'abstract', 'any', 'as', 'asserts', 'bigint', 'boolean', 'declare', 'enum', 'implements', 'infer',
  'interface', 'is', 'keyof', 'namespace', 'never', 'number', 'object', 'private', 'protected',
  'public', 'readonly', 'satisfies', 'string', 'symbol', 'type', 'unique', 'unknown',
];

// Names in order: case aside, then `_`-names last, as IPython lists them.
function byName(a, b) {
  const privateA = a.startsWith('_');
  const privateB = b.startsWith('_');
  if (privateA !== privateB) return privateA ? 1 : -1;
  const la = a.toLowerCase();
  const lb = b.toLowerCase();
  if (la !== lb) return la < lb ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

// `complete_reply`'s content for the code up to `cursorPos`: the names that
// complete the identifier before the cursor, as a global or lexical name, or
// as a property of the member chain before its dot.
async function completion(code, cursorPos) {
  const cursor = utf16Offset(code, cursorPos);
  const prefix = code.slice(0, cursor);
  const reply = (matches, start) => ({
    status: 'ok',
    matches,
    cursor_start: codePointLength(prefix.slice(0, start)),
    cursor_end: codePointLength(prefix),
    metadata: {},
  });
  if (prefix.length > MAX_READ) return reply([], cursor);
  const lexed = lex(prefix);
  if (lexed.end !== 'code') return reply([], cursor);
  const { tokens } = lexed;
  let before = tokens.length - 1;
  let partial = '';
  let start = cursor;
  const last = tokens[before];
  if (last && last.end === cursor && last.type === 'name') {
    partial = last.value;
    start = last.start;
    before -= 1;
  } else if (last && last.end === cursor && last.type !== 'punct') {
    return reply([], cursor);
  }
  if (partial.startsWith('#')) return reply([], cursor);
  const dot = tokens[before];
  let names;
  try {
    if (dot && dot.type === 'punct' && (dot.value === '.' || dot.value === '?.')) {
      const first = chainStart(lexed, before - 1);
      if (first < 0) return reply([], cursor);
      names = await propertyNames(prefix.slice(tokens[first].start, tokens[before - 1].end), partial);
    } else if (partial) {
      const lexical = await post('Runtime.globalLexicalScopeNames', {}).catch(() => ({ names: [] }));
      const keywords = typescript ? KEYWORDS.concat(TYPESCRIPT_KEYWORDS) : KEYWORDS;
      names = [
        ...(await propertyNames('globalThis', partial)),
        ...lexical.names.filter((name) => name.startsWith(partial)),
        ...keywords.filter((name) => name.startsWith(partial)),
      ];
    } else {
      names = [];
    }
  } finally {
    await post('Runtime.releaseObjectGroup', { objectGroup: PEEK_GROUP }).catch(() => {});
  }
  const matches = [...new Set(names.filter((name) => name.length <= MAX_NAME && NAME_ONLY.test(name)))]
    .sort(byName)
    .slice(0, MAX_MATCHES);
  return reply(matches, start);
}

// The message of the SyntaxError compiling `source` as a script raises, or
// null. Compiled, never run.
function syntaxError(source) {
  try {
    new vm.Script(source, { filename: '[is_complete]' });
    return null;
  } catch (e) {
    return String(e && e.message);
  }
}

const ENDS_EARLY = /Unexpected end of input|Unterminated template/;

// `is_complete_reply`'s content: whether the cell can run as it stands, needs
// more lines (with the indent the next one takes) or cannot become valid.
function completeness(code) {
  if (code.length > MAX_READ) return { status: 'unknown' };
  const lexed = lex(code);
  const incomplete = () => {
    if (lexed.end !== 'code') return { status: 'incomplete', indent: '' };
    const lines = code.split('\n');
    const line = lines.reverse().find((l) => l.trim()) || '';
    const indent = line.match(/^[ \t]*/)[0];
    return { status: 'incomplete', indent: /[{([]\s*$/.test(code) ? `${indent}  ` : indent };
  };
  if (lexed.mismatch) return { status: 'invalid' };
  if (lexed.end === 'template' || lexed.end === 'comment' || (lexed.end === 'string' && lexed.continued)) {
    return incomplete();
  }
  // A string or regular expression cut by the end of its line stays invalid
  // whatever lines follow.
  if (lexed.end !== 'code') return { status: 'invalid' };
  let source;
  try {
    source = compile(code);
  } catch (e) {
    // sucrase's errors carry their position: at the end, more could follow.
    // One earlier may be its parser giving up on a construct cut short
    // (`<T,>(x: T) =>`, `b as`): then one more name takes it further.
    if (!e || typeof e.pos !== 'number') return { status: 'unknown' };
    const end = code.trimEnd().length;
    if (e.pos >= end) return incomplete();
    try {
      compile(`${code}\n x`);
      return incomplete();
    } catch (further) {
      return further && further.pos > end ? incomplete() : { status: 'invalid' };
    }
  }
  const error = syntaxError(source);
  if (error === null) return { status: 'complete' };
  // (Brackets nested past the parser's stack say nothing either way.)
  if (/call stack/.test(error)) return { status: 'unknown' };
  // REPL mode allows `await` at the top level, which a script does not: such
  // a cell compiles as an async function's body, or ends early in one left open.
  if (/\bawait\b|reserved word/.test(error)) {
    if (syntaxError(`(async function () {\n${source}\n})`) === null) return { status: 'complete' };
    return ENDS_EARLY.test(syntaxError(`(async function () {\n${source}\n`)) ? incomplete() : { status: 'invalid' };
  }
  return ENDS_EARLY.test(error) ? incomplete() : { status: 'invalid' };
}

function capped(text, limit) {
  return text.length > limit ? `${text.slice(0, limit)}…` : text;
}

// A remote value as V8 previews it (`{a: 1, b: Array(3)}`, `Map(1) {'k' =>
// Object}`). V8 makes a preview without running any of the value's code;
// `util.inspect` would run its getters of `Symbol.toStringTag` and of its
// constructor's `name`, and its proxies' traps.
function previewText(remote) {
  if (remote.type === 'string') return util.inspect(capped(remote.value, MAX_TEXT));
  if (remote.type === 'undefined') return 'undefined';
  if (remote.type === 'function') return capped(String(remote.description), MAX_TEXT);
  if (remote.subtype === 'null') return 'null';
  if (remote.type !== 'object') return String(remote.description !== undefined ? remote.description : remote.value);
  const preview = remote.preview;
  if (remote.subtype === 'error') return capped(traceback({ stack: String(remote.description) }), MAX_TEXT);
  if (!preview || ['date', 'regexp', 'promise'].includes(remote.subtype)) return capped(String(remote.description), MAX_TEXT);
  return objectPreviewText(preview);
}

function objectPreviewText(preview) {
  if (preview.type !== 'object') {
    return preview.type === 'string' ? util.inspect(preview.description) : String(preview.description);
  }
  const value = (p) => {
    if (p.valuePreview) return objectPreviewText(p.valuePreview);
    if (p.type === 'string') return util.inspect(p.value);
    if (p.type === 'accessor') return '[Getter/Setter]';
    if (p.type === 'function') return '[Function]';
    return String(p.value);
  };
  const indexed = preview.subtype === 'array' || preview.subtype === 'typedarray';
  const items = [];
  for (const p of preview.properties || []) {
    if (indexed && /^\d+$/.test(p.name)) {
      items.push(value(p));
    } else if (preview.subtype !== 'typedarray' && !(preview.entries && p.name === 'size')) {
      // (V8 lists a typed array's buffer fields and a collection's size
      // beside its items.)
      items.push(`${p.name}: ${value(p)}`);
    }
  }
  for (const e of preview.entries || []) {
    items.push(e.key ? `${objectPreviewText(e.key)} => ${objectPreviewText(e.value)}` : objectPreviewText(e.value));
  }
  if (preview.overflow) items.push('…');
  if (indexed) return `${preview.subtype === 'array' ? '' : `${preview.description} `}[${items.join(', ')}]`;
  return `${preview.description === 'Object' ? '' : `${preview.description} `}{${items.join(', ')}}`;
}

// `remote` with V8's preview of it. V8 previews an array by listing all its
// keys, seconds for a million items: an array's preview is of its first
// hundred.
async function previewed(remote) {
  if (!remote || remote.type !== 'object' || !remote.objectId) return remote;
  const indexed = remote.subtype === 'array' || remote.subtype === 'typedarray';
  const shown = await post('Runtime.callFunctionOn', {
    objectId: remote.objectId,
    functionDeclaration: indexed ? 'function () { return Array.prototype.slice.call(this, 0, 100) }' : 'function () { return this }',
    throwOnSideEffect: true,
    generatePreview: true,
    silent: true,
    objectGroup: PEEK_GROUP,
  }).catch(() => null);
  if (!shown || shown.exceptionDetails || !shown.result.preview) return remote;
  const { preview } = shown.result;
  const length = Number((/\((\d+)\)$/.exec(String(remote.description)) || [])[1]);
  return {
    ...remote,
    preview: indexed ? { ...preview, subtype: remote.subtype, description: remote.description, overflow: preview.overflow || length > 100 } : preview,
  };
}

// `inspect_reply`'s content: for the name at the cursor (or, in a call's
// arguments, the function called), its type and value, or a function's
// signature (its source's first line) and, at detail level 1, its source.
async function inspection(code, cursorPos, detailLevel) {
  const notFound = { status: 'ok', found: false, data: {}, metadata: {} };
  const cursor = utf16Offset(code, cursorPos);
  const text = code.slice(0, cursor) + code.slice(cursor, cursor + MAX_NAME).match(NAME_REST)[0];
  if (text.length > MAX_READ) return notFound;
  const lexed = lex(text);
  if (lexed.end !== 'code') return notFound;
  const { tokens } = lexed;
  let last = tokens.length - 1;
  const atCursor = tokens[last] && tokens[last].end === text.length
    && (tokens[last].type !== 'punct' || tokens[last].value === ')' || tokens[last].value === ']');
  if (!atCursor) {
    const call = lexed.open.filter((at) => tokens[at].value === '(').pop();
    if (call === undefined) return notFound;
    last = call - 1;
  }
  const first = chainStart(lexed, last);
  if (first < 0 || (tokens[first].type === 'name' && tokens[first].value.startsWith('#'))) return notFound;
  const expression = text.slice(tokens[first].start, tokens[last].end);
  try {
    const remote = await previewed(await peek(expression));
    if (!remote) return notFound;
    const source = remote.type === 'function' ? String(remote.description) : null;
    const type = remote.type === 'object' ? (remote.subtype === 'null' ? 'null' : remote.className) : remote.type;
    const lines = [`Type: ${type}`];
    if (source !== null) {
      lines.push(`Signature: ${capped(source.split('\n')[0], 500)}`);
      if (detailLevel >= 1) lines.push(`Source:\n${capped(source, MAX_TEXT)}`);
    } else {
      lines.push(`Value: ${previewText(remote)}`);
    }
    return { status: 'ok', found: true, data: { 'text/plain': lines.join('\n') }, metadata: {} };
  } finally {
    await post('Runtime.releaseObjectGroup', { objectGroup: PEEK_GROUP }).catch(() => {});
  }
}

// The cells this kernel ran, for `history_request`: [line, input, output],
// the oldest dropped past a count or a size; a reply holds the newest of
// those asked for that fit in its budget. The kernel knows one session, 1.
const HISTORY_SESSION = 1;
const MAX_HISTORY = 1000;
const MAX_HISTORY_CHARS = 4 * 1024 * 1024;
const MAX_HISTORY_INPUT = 64 * 1024;
const MAX_HISTORY_REPLY_BYTES = 512 * 1024;
const history = [];
let historyChars = 0;

function remember(line, input, output) {
  const entry = [line, capped(input, MAX_HISTORY_INPUT), output === null ? null : capped(output, MAX_TEXT)];
  history.push(entry);
  historyChars += entry[1].length + (entry[2] || '').length;
  while (history.length > MAX_HISTORY || historyChars > MAX_HISTORY_CHARS) {
    const [, oldInput, oldOutput] = history.shift();
    historyChars -= oldInput.length + (oldOutput || '').length;
  }
}

// A glob (`*` and `?`, as IPython's history search takes) as a regex of
// the whole text.
function globPattern(glob) {
  let out = '';
  for (const c of String(glob)) {
    if (c === '*') out += '[\\s\\S]*';
    else if (c === '?') out += '[\\s\\S]';
    else out += c.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&');
  }
  return new RegExp(`^${out}$`);
}

// `history_reply`'s content for a `tail`, `range` or `search` request.
function historyReply(content) {
  const n = Math.min(Math.max(Math.floor(Number(content.n)) || MAX_HISTORY, 1), MAX_HISTORY);
  let found = [];
  if (content.hist_access_type === 'tail') {
    found = history.slice(-n);
  } else if (content.hist_access_type === 'range') {
    const session = Number(content.session) || 0;
    if (session === 0 || session === HISTORY_SESSION) {
      const start = Number(content.start) || 0;
      const stop = content.stop === undefined || content.stop === null ? Infinity : Number(content.stop);
      found = history.filter(([line]) => line >= start && line < stop);
    }
  } else if (content.hist_access_type === 'search') {
    const pattern = globPattern(content.pattern === undefined ? '*' : content.pattern);
    found = history.filter(([, input]) => pattern.test(input));
    if (content.unique) {
      const latest = new Map(found.map((entry) => [entry[1], entry]));
      found = found.filter((entry) => latest.get(entry[1]) === entry);
    }
    found = found.slice(-n);
  }
  const entries = [];
  let bytes = 0;
  for (let at = found.length - 1; at >= 0; at -= 1) {
    const [line, input, output] = found[at];
    const entry = [HISTORY_SESSION, line, content.output ? [input, output] : input];
    bytes += Buffer.byteLength(JSON.stringify(entry));
    if (bytes > MAX_HISTORY_REPLY_BYTES) break;
    entries.push(entry);
  }
  return { status: 'ok', history: entries.reverse() };
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
      const code = String(m.content.code || '');
      const outcome = await evaluate(code);
      let output = null;
      if (outcome.error !== undefined || outcome.interrupted) {
        const content = errorContent(outcome.interrupted ? outcome : outcome.error);
        publish('error', content, m.header);
        reply('execute_reply', { status: 'error', execution_count: count, ...content });
      } else {
        if (outcome.hasValue && !silent) {
          const data = bundle(outcome.value);
          output = data['text/plain'];
          publish('execute_result', { execution_count: count, data, metadata: {} }, m.header);
        }
        reply('execute_reply', { status: 'ok', execution_count: count, payload: [], user_expressions: {} });
      }
      if (!silent && m.content.store_history !== false) remember(count, code, output);
      current = null;
    } else if (type === 'is_complete_request') {
      reply('is_complete_reply', completeness(String(m.content.code || '')));
    } else if (type === 'complete_request') {
      reply('complete_reply', await completion(String(m.content.code || ''), cursorOf(m.content)));
    } else if (type === 'inspect_request') {
      reply('inspect_reply', await inspection(String(m.content.code || ''), cursorOf(m.content), Number(m.content.detail_level) || 0));
    } else if (type === 'history_request') {
      reply('history_reply', historyReply(m.content));
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
