#!/usr/bin/env bash
# Runs E2B's own SDK suites (e2b-dev/code-interpreter's python/tests and
# js/tests, kept outside the repository as evaluation material) against a
# release runcell this script starts itself: the Python suite with the SDK
# pair scripts/api-test-requirements.txt pins and with the older pair
# (scripts/api-test-requirements-e2b-older.txt), then the JavaScript suite.
# The suites are copied to a scratch directory under /tmp and run unchanged.
#
#   scripts/peers-e2b.sh     (after scripts/build.sh)
#
# The suites are read from $RUNCELL_PEERS_DIR/e2b-code-interpreter (default
# ../shared/peers beside the checkout); without them it says so and exits 0.
# The systemd tests are left out (they kill and expect restarts of E2B's own
# in-sandbox servers); any other failure exits non-zero.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
started=$SECONDS

peers=${RUNCELL_PEERS_DIR:-$ROOT/../shared/peers}
suites=$peers/e2b-code-interpreter
if [ ! -d "$suites/python/tests" ] || [ ! -d "$suites/js/tests" ]; then
  echo "no E2B suites at $suites (RUNCELL_PEERS_DIR): skipped"
  exit 0
fi
bin=target/release/runcell
[ -x "$bin" ] || die "no release build at $bin: run scripts/build.sh"
# Said, not refused: the suites test what the binary serves.
if [ "$(stat -c %Y "$bin")" -lt "$(git log -1 --format=%ct -- crates server app frontend Cargo.toml)" ]; then
  say "note: $bin (built $(date -r "$bin" -u +%FT%TZ)) is older than the last commit to the code: scripts/build.sh builds a new one"
fi

cache=${RUNCELL_CACHE:-$HOME/.cache/runcell}
# What runs the Python suite beside the SDKs (its pytest.ini asks for xdist's
# --numprocesses and pytest-asyncio's loop scopes).
runner_pins=(pytest==9.2.0 pytest-xdist==3.8.0 pytest-asyncio==1.5.0)

# A venv at $1 with the SDK pair named in the requirements file $2 and the
# runner; rebuilt only when those pins change (the stamp is written last).
sdk_venv() {
  local venv=$1 pins
  pins=$(grep -E '^(e2b|e2b-code-interpreter)==' "$2" | sort)
  [ "$(wc -l <<<"$pins")" = 2 ] || die "$2 does not pin both e2b and e2b-code-interpreter"
  pins=$(printf '%s\n' "$pins" "${runner_pins[@]}")
  if [ "$pins" = "$(cat "$venv/runcell-pins.txt" 2>/dev/null)" ]; then return; fi
  step "building ${venv#"$cache"/} ($(grep -E '^e2b' <<<"$pins" | paste -sd ' '))"
  rm -rf "$venv"
  python3 -m venv "$venv"
  # shellcheck disable=SC2086 # one requirement a word
  "$venv/bin/pip" install --quiet --disable-pip-version-check $pins
  printf '%s\n' "$pins" >"$venv/runcell-pins.txt"
}
sdk_venv "$cache/peers-e2b-py" "$ROOT/scripts/api-test-requirements.txt"
sdk_venv "$cache/peers-e2b-py-older" "$ROOT/scripts/api-test-requirements-e2b-older.txt"

# The JavaScript suite imports the SDK's source (js/src) and its package.json's
# dependencies, installed once outside the checkout and reinstalled when that
# package.json changes (the suite ships no lockfile).
js_deps=$cache/peers-e2b-js
if ! cmp -s "$suites/js/package.json" "$js_deps/runcell-package.json" 2>/dev/null; then
  step "installing the JavaScript suite's packages in $js_deps"
  rm -rf "$js_deps"
  mkdir -p "$js_deps"
  cp "$suites/js/package.json" "$js_deps/package.json"
  (cd "$js_deps" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
  cp "$suites/js/package.json" "$js_deps/runcell-package.json"
fi

throwaway_data
scratch=$(mktemp -d /tmp/runcell-peers-e2b.XXXXXX)
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true; wait 2>/dev/null || true
  rm -rf "$data" "$scratch"' EXIT

step "starting $bin serve with the scripted model"
# The key is made before the server starts, as the end-to-end tests make theirs.
key=$("$bin" keys create --name peers-e2b --data-dir "$data" | tail -n 1)
serve_throwaway "$bin"
export E2B_API_URL=http://127.0.0.1:$port E2B_SANDBOX_URL=http://127.0.0.1:$port
export E2B_API_KEY=$key E2B_VALIDATE_API_KEY=false
say "runcell on 127.0.0.1:$port (log: $data/runcell.log while it runs)"

summary=()
failed=0
# A JUnit report's counts ("passed failed skipped") on the first line, then
# the tests that failed, one a line.
counts() {
  python3 - "$1" <<'EOF'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
cases = list(root.iter("testcase"))
failed = [c for c in cases if c.find("failure") is not None or c.find("error") is not None]
skipped = [c for c in cases if c.find("skipped") is not None]
print(len(cases) - len(failed) - len(skipped), len(failed), len(skipped))
for c in failed:
    print(f"  failed: {c.get('classname')} > {c.get('name')}")
EOF
}
# Records one suite's line: $1 its name, $2 its JUnit report, $3 what was left out.
record() {
  local passed bad skipped
  if [ ! -s "$2" ]; then
    summary+=("$1: no report (the run broke before its tests: see above)")
    failed=1
    return
  fi
  local report
  report=$(counts "$2")
  read -r passed bad skipped <<<"$(head -n 1 <<<"$report")"
  summary+=("$1: $passed passed, $bad failed, $skipped skipped; $3")
  if [ "$bad" != 0 ]; then summary+=("$(tail -n +2 <<<"$report")"); fi
  [ "$bad" = 0 ] || failed=1
}

# $1 names the run, $2 its venv.
py_suite() {
  local name=$1 venv=$2 dir=$scratch/python-${2##*/} t0=$SECONDS deselected
  mkdir -p "$dir"
  cp -r "$suites/python/tests" "$suites/python/pytest.ini" "$dir/"
  # Copies of a read-only tree are read-only: the runs write beside them.
  chmod -R u+w "$dir"
  step "E2B's Python suite, $name ($(grep -E '^e2b' "$venv/runcell-pins.txt" | paste -sd ' '))"
  # The systemd tests, by the suite's own file names (test_systemd.py,
  # test_async_systemd.py): counted first, as xdist's summary does not say.
  deselected=$(cd "$dir" && "$venv/bin/python" -m pytest tests --co -q -n 0 -p no:cacheprovider \
    -k systemd 2>/dev/null | grep -Eo '^[0-9]+/[0-9]+ tests collected' | cut -d/ -f1 || true)
  (cd "$dir" && "$venv/bin/python" -m pytest tests -q -rfE -p no:cacheprovider \
    -k 'not systemd' --junitxml="$dir/report.xml") 2>&1 | tee "$dir/log" || true
  record "python, $name" "$dir/report.xml" "${deselected:-no} systemd tests left out; $((SECONDS - t0)) s"
}
py_suite "pinned SDKs" "$cache/peers-e2b-py"
py_suite "older SDKs" "$cache/peers-e2b-py-older"

js_suite() {
  local dir=$scratch/js t0=$SECONDS
  cp -r "$suites/js" "$dir"
  chmod -R u+w "$dir"
  ln -s "$js_deps/node_modules" "$dir/node_modules"
  step "E2B's JavaScript suite (vitest, the SDK's own source with e2b $(
    node -p "require('$js_deps/node_modules/e2b/package.json').version"))"
  (cd "$dir" && npx vitest run --exclude 'tests/systemd.test.ts' --exclude 'tests/runtimes/**' \
    --reporter=default --reporter=junit --outputFile.junit="$dir/report.xml") 2>&1 | tee "$dir/log" || true
  record "javascript" "$dir/report.xml" "tests/systemd.test.ts left out; $((SECONDS - t0)) s"
}
js_suite

elapsed=$((SECONDS - started))
printf '\n'
printf '%s\n' "${summary[@]}"
printf 'E2B suites against runcell: %s, %dm%02ds\n' \
  "$([ "$failed" = 0 ] && echo "all passed" || echo "FAILURES")" $((elapsed / 60)) $((elapsed % 60))
exit "$failed"
