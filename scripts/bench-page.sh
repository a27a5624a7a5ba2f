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
throwaway_data
serve_throwaway "$bin"
(cd "$ROOT/end2end" && node page-load.mjs "http://127.0.0.1:$port" "$runs")
