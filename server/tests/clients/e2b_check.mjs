// E2B's official JavaScript SDKs (e2b, @e2b/code-interpreter) using runcell
// as their cloud: the cases of E2B's own js/tests suites that a sandbox
// without network can pass, re-done by name.
//
// Usage: E2B_JS_SDK=DIR (where the SDKs are installed) E2B_API_URL=URL
//        E2B_SANDBOX_URL=URL E2B_API_KEY=KEY node e2b_check.mjs
// Exits non-zero, saying what went wrong, on the first unexpected answer.

import { createRequire } from 'node:module';
import { join } from 'node:path';

const sdk = createRequire(join(process.env.E2B_JS_SDK, 'package.json'));
const { Sandbox } = sdk('@e2b/code-interpreter');

function check(ok, what, got) {
  if (!ok) {
    console.log(`FAILED: ${what}: ${JSON.stringify(got)}`);
    process.exit(1);
  }
  console.log(`ok: ${what}`);
}

const sandbox = await Sandbox.create({ timeoutMs: 120_000, envs: { GREETING: 'hi' } });
try {
  check(Boolean(sandbox.sandboxId), 'a sandbox is created', sandbox.sandboxId);

  // basic, statefulness, executionCount
  const first = await sandbox.runCode('x = 41\nprint("hello")');
  check(first.logs.stdout.join('') === 'hello\n', 'python: stdout in logs', first.logs);
  const second = await sandbox.runCode('x + 1');
  check(second.text === '42', 'python: state kept, text is the value', second.text);
  check(second.executionCount === 2, 'executions are counted', second.executionCount);

  // streaming callbacks
  const streamed = [];
  await sandbox.runCode('print("a")\nimport sys; print("b", file=sys.stderr)', {
    onStdout: (m) => streamed.push(['out', m.line]),
    onStderr: (m) => streamed.push(['err', m.line]),
  });
  check(streamed.some(([k, l]) => k === 'out' && l === 'a\n') && streamed.some(([k, l]) => k === 'err' && l === 'b\n'),
    'callbacks get stdout and stderr', streamed);

  // errors
  const failed = await sandbox.runCode('1 / 0');
  check(failed.error && failed.error.name === 'ZeroDivisionError', 'an exception is execution.error', failed.error);

  // charts, data, images (E2B's template formatters)
  const chart = await sandbox.runCode(
    "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('Squares')\nplt.show()");
  const charted = chart.results.find((r) => r.chart);
  check(charted && charted.png && charted.chart.type === 'line' && charted.chart.title === 'Squares',
    'a figure is a png with its chart', chart.results.map((r) => r.formats()));
  const frame = await sandbox.runCode("import pandas as pd\npd.DataFrame({'a': [1, 2]})");
  check(frame.results[0] && JSON.stringify(frame.results[0].data) === '{"a":[1,2]}', 'a data frame has its data',
    frame.results[0] && frame.results[0].data);

  // languages/js, languages/ts
  const js = (code, opts = {}) => sandbox.runCode(code, { language: 'js', ...opts });
  await js('const z = 1');
  check((await js('z')).text === '1', 'js context', null);
  const awaited = await js("async function main() {\n  return 'Hello, World!'\n}\n\nawait main()");
  check(awaited.text === 'Hello, World!', 'js top level await', awaited.text);
  check((await js('const add = (x, y) => x + y;\nadd(1, 2)')).text === '3', 'js es6', null);
  check((await js('process.cwd()')).text === '/home/user', 'js cwd', null);
  const ctx = await sandbox.createCodeContext({ cwd: '/home', language: 'js' });
  check((await sandbox.runCode('process.cwd()', { context: ctx })).text === '/home', 'js cwd of a context', ctx);
  const ts = await sandbox.runCode('function subtract(x: number, y: number): number {\n  return x - y;\n}\n\nsubtract(1, 2)',
    { language: 'ts' });
  check(ts.text === '-1', 'ts simple', ts.text);

  // env_vars/js, env_vars/bash
  check((await js('process.env.GREETING')).text === 'hi', 'js sees the sandbox envs', null);
  const perRun = await js('process.env.FOO', { envs: { FOO: 'bar' } });
  const after = await js("process.env.FOO || 'default'");
  check(perRun.text === 'bar' && after.text === 'default', 'js: a run\'s envs, then undone', [perRun.text, after.text]);
  const bash = await sandbox.runCode('echo $FOO', { language: 'bash', envs: { FOO: 'bar' } });
  check(bash.logs.stdout.join('') === 'bar\n', 'bash: a run\'s envs', bash.logs);

  // r
  const r = await sandbox.runCode('x <- c(1, 2, 3, 4)\nmean(x)', { language: 'r' });
  check(r.results[0] && r.results[0].text === '[1] 2.5', 'r runs', r.results);

  // contexts
  const contexts = await sandbox.listCodeContexts();
  check(contexts.some((c) => c.id === ctx.id), 'contexts are listed', contexts);

  // files and commands (the base SDK)
  await sandbox.files.write('/home/user/a.txt', 'hello world\n');
  check((await sandbox.files.read('/home/user/a.txt')) === 'hello world\n', 'a file is written and read', null);
  const command = await sandbox.commands.run('cat a.txt; echo $GREETING', { cwd: '/home/user' });
  check(command.exitCode === 0 && command.stdout === 'hello world\nhi\n', 'a command runs', command);

  check(await sandbox.isRunning(), 'the sandbox is running', null);
} finally {
  await sandbox.kill();
}
check(!(await sandbox.isRunning()), 'a killed sandbox is not running', null);
console.log('ok: all E2B JS SDK calls answered');
