#!/usr/bin/env bash
# A phone's page load: starts a runcell (the scripted model, a throwaway data
# directory, loopback) and runs end2end/page-load.mjs against it in Chromium
# under Lighthouse's mobile throttling. Prints first paint, the bundle's
# arrival and when the page is live, for the home page and an answered
# session, cold and warm cache (medians of RUNS loads).
#
#   scripts/bench-page.sh [RUNS]      (default 3; needs scripts/build.sh)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

runs=${1:-3}
bin=${RUNCELL_BIN:-$TARGET_DIR/release/runcell}
[ -x "$bin" ] || die "no release build at $bin (run scripts/build.sh)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
data=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$data"
}
trap cleanup EXIT
RUNCELL_LLM=scripted RUNCELL_LOG=warn "$bin" serve --addr "127.0.0.1:$port" --data-dir "$data" \
  >"$data/runcell.log" 2>&1 &
pid=$!
for _ in $(seq 1 240); do
  curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { cat "$data/runcell.log" >&2; die "runcell did not start"; }
  sleep 0.5
done
(cd "$ROOT/end2end" && node page-load.mjs "http://127.0.0.1:$port" "$runs")
