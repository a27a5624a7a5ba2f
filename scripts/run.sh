#!/usr/bin/env bash
# Sets up, builds and serves runcell on its embedded defaults
# (http://127.0.0.1:3000, data in ./data). Extra arguments go to `runcell serve`.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
"$ROOT/scripts/setup.sh" run
"$ROOT/scripts/build.sh"
step "checking the sandbox"
"$ROOT/target/release/runcell" doctor || say "warning: the sandbox is not ready: the pages work, code will not run"
step "serving runcell (Ctrl+C stops it)"
exec "$ROOT/target/release/runcell" serve "$@"
