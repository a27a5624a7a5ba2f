# Shared by the scripts: paths and small helpers. Source it; do not run it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
# The built site (bundle, styles, public files) always lives in the checkout,
# where `runcell serve` started from the repo root looks for it.
SITE_DIR=$ROOT/target/site
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

say() { printf '%s\n' "$*" >&2; }
step() { printf '\n== %s  [%dm%02ds]\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)) >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# The wasm-bindgen version in Cargo.lock: the CLI must match it exactly.
wasm_bindgen_version() {
  awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' "$ROOT/Cargo.lock"
}

# A free TCP port on loopback.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# A runcell a bench starts for itself: `throwaway_data` makes $data, a data
# directory removed on exit with the server killed; `serve_throwaway BIN`
# starts BIN on a free loopback port ($port) with that directory and the
# scripted model, logging to $data/runcell.log, and waits for /healthz.
throwaway_data() {
  data=$(mktemp -d)
  server_pid=
  trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$data"' EXIT
}
serve_throwaway() {
  port=$(free_port)
  RUNCELL_LLM=scripted RUNCELL_LOG=warn "$1" serve --addr "127.0.0.1:$port" --data-dir "$data" \
    >"$data/runcell.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 240); do
    curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && return 0
    kill -0 "$server_pid" 2>/dev/null || { cat "$data/runcell.log" >&2; die "runcell did not start"; }
    sleep 0.5
  done
  die "runcell did not answer /healthz within 2 minutes"
}
