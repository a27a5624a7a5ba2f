#!/usr/bin/env bash
# Runs `runcell bench agent` against a runcell started for it, on loopback,
# with a throwaway data directory:
#
#   scripts/bench-agent.sh embedded MODEL.gguf [bench flags…]
#       the embedded model (a file under data/models/, or a path)
#   scripts/bench-agent.sh peer MODEL.gguf [bench flags…]
#       llama-cpp-python's OpenAI-compatible server on the same GGUF, which
#       runcell talks to as to any OpenAI-compatible server
#
# RUNCELL_BENCH_LOG=FILE keeps the server's log; RUNCELL_BENCH=dabench runs
# `runcell bench dabench` (the DABench questions) instead of `bench agent`.
# Needs a release build (scripts/build.sh). Prints the bench's table; pass
# `--out FILE.json` to keep every turn's details.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

kind=${1:-}
model=${2:-}
shift 2 || die "usage: scripts/bench-agent.sh embedded|peer MODEL.gguf [bench flags…]"
[ -f "$model" ] || model="$ROOT/data/models/$model"
[ -f "$model" ] || die "no model file $model"
model=$(realpath "$model")
bin=${RUNCELL_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release/runcell}
[ -x "$bin" ] || die "no release build at $bin (run scripts/build.sh)"

data=$(mktemp -d)
pids=()
cleanup() {
  # RUNCELL_BENCH_LOG=FILE keeps the server's log (why a turn went as it did).
  if [ -n "${RUNCELL_BENCH_LOG:-}" ] && [ -f "$data/runcell.log" ]; then
    cp "$data/runcell.log" "$RUNCELL_BENCH_LOG"
  fi
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$data"
}
trap cleanup EXIT
mkdir -p "$data/models"
ln -s "$model" "$data/models/$(basename "$model")"

wait_for() {
  local url=$1 what=$2
  for _ in $(seq 1 240); do
    curl -fsS "$url" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  die "$what did not start; see $data/*.log"
}

port=$(free_port)
case "$kind" in
  embedded)
    RUNCELL_LLM=embedded RUNCELL_MODEL_PATH="$model" \
      "$bin" serve --addr "127.0.0.1:$port" --data-dir "$data" >"$data/runcell.log" 2>&1 &
    pids+=($!)
    ;;
  peer)
    python=${RUNCELL_CACHE:-$HOME/.cache/runcell}/llama-cpp-python-0.3.36/bin/python
    [ -x "$python" ] || die "no llama-cpp-python (run scripts/setup-llama-cpp-python.sh)"
    peer_port=$(free_port)
    "$python" -m llama_cpp.server --model "$model" --host 127.0.0.1 --port "$peer_port" \
      --chat_format chatml-function-calling --n_ctx 8192 --n_threads 2 >"$data/peer.log" 2>&1 &
    pids+=($!)
    wait_for "http://127.0.0.1:$peer_port/v1/models" "llama_cpp.server"
    RUNCELL_LLM=openai OPENAI_BASE_URL="http://127.0.0.1:$peer_port/v1" \
      "$bin" serve --addr "127.0.0.1:$port" --data-dir "$data" >"$data/runcell.log" 2>&1 &
    pids+=($!)
    ;;
  *) die "the first argument is embedded or peer" ;;
esac
wait_for "http://127.0.0.1:$port/healthz" "runcell"
"$bin" bench "${RUNCELL_BENCH:-agent}" --url "http://127.0.0.1:$port" "$@"
