#!/usr/bin/env bash
# Sets up and runs every check: format, lints, unit and integration tests, the
# release build, and the Playwright specs in Debian's Chromium (JS off and on).
# Exits non-zero on the first failure; ends with one summary line.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
started=$SECONDS
"$ROOT/scripts/setup.sh" test
# Tests that need a real peer (model file, llama-cpp-python) fail instead of
# skipping when it is missing.
export RUNCELL_TEST_REQUIRE_PEERS=1

step "format"
cargo fmt --all --check
# The README must open with its two commands: the run command, then the tests.
[ "$(grep -m2 -o 'scripts/[a-z]*\.sh' "$ROOT/README.md" | tr '\n' ' ')" = "scripts/run.sh scripts/test.sh " ] \
  || die "README.md must start with the run and test commands"

step "lints"
# Every crate but the browser's (linted for its own target below); `app` is
# built with `ssr` here, as the server uses it.
cargo clippy -q --workspace --exclude frontend --all-targets -- -D warnings
cargo clippy -q -p frontend --target wasm32-unknown-unknown -- -D warnings
# Inside each crate: no two modules that use each other, no source file over
# 600 production lines. Across crates: the domain crates reach no UI or web
# framework and no runcell crate above them.
python3 "$ROOT/scripts/check-layers.py"
python3 "$ROOT/scripts/check-crates.py"

step "unit and integration tests"
cargo_log=$(mktemp)
e2e_data=$(mktemp -d)
e2e_log=$(mktemp)
# A throwaway PostgreSQL server for the PostgreSQL store's tests.
pg_dir=$(mktemp -d)
cleanup() {
  "$ROOT/scripts/pg-cluster.sh" stop "$pg_dir"
  rm -rf "$cargo_log" "$e2e_data" "$e2e_log"
}
trap cleanup EXIT
RUNCELL_TEST_DATABASE_URL=$("$ROOT/scripts/pg-cluster.sh" start "$pg_dir")
export RUNCELL_TEST_DATABASE_URL
# One build of the graph for every crate's tests (the browser's crate has
# none of its own; its code is `app`'s, tested here).
cargo test --workspace --exclude frontend 2>&1 | tee -a "$cargo_log"
rust_passed=$(grep -Eo '^test result: ok\. [0-9]+ passed' "$cargo_log" | awk '{s+=$4} END {print s+0}')

step "release build"
"$ROOT/scripts/build.sh"

step "sandbox doctor"
"$ROOT/target/release/runcell" doctor

step "E2B's own SDK suites (Python with both SDK pairs, JavaScript) against the release build"
# Other people's tests of the E2B protocol, read from ../shared/peers
# (RUNCELL_PEERS_DIR) and copied to /tmp; skipped when they are absent. The
# systemd tests (they restart E2B's own in-sandbox servers) are left out.
"$ROOT/scripts/peers-e2b.sh"

step "abuse: the review's attacks at once while a key and a signed-in page are served"
# Fails on any good request answered wrong or 5xx, on the server dying, or on
# its RSS growing over the budget (numbers in docs/benchmarks.md).
(cd "$(mktemp -d)" && "$ROOT/target/release/runcell" bench abuse --seconds 20)

step "end-to-end (Chromium, JavaScript off and on)"
port=$(free_port)
# The OpenID provider people sign in with listens beside it, on another.
oidc_port=$(free_port)
while [ "$oidc_port" = "$port" ]; do oidc_port=$(free_port); done
(cd "$ROOT/end2end" && RUNCELL_E2E_PORT=$port RUNCELL_E2E_OIDC_PORT=$oidc_port RUNCELL_E2E_DATA=$e2e_data \
  npx playwright test) 2>&1 | tee "$e2e_log"
# A count Playwright does not print is none (grep finds nothing: not a
# failure under pipefail).
count() { { grep -Eo "^ +[0-9]+ $1" "$e2e_log" || true; } | awk '{s+=$1} END {print s+0}'; }
e2e_passed=$(count passed)
e2e_skipped=$(count skipped)
# Passed only on their retry: said, never counted as passed.
e2e_flaky=$(count flaky)

step "a phone's page load: Chromium, throttled (numbers for the log; it fails only if a page never comes alive)"
"$ROOT/scripts/bench-page.sh" 1

step "agent benchmark, a subset: the embedded model"
# Eleven of the benchmark's tasks, one or two of each kind, through the real
# agent: the table goes into the CI log beside the full runs in docs/benchmarks.md. It
# fails on a broken harness or server, never on a rate (a rate on a few tasks
# is noise; the full runs are in docs/benchmarks.md). The OpenAI-compatible peer on the
# same GGUF is left to the full runs (`scripts/bench-agent.sh peer`): the
# integration tests already drive the agent through it, and its subset took
# seven of CI's minutes.
# The default model (DEFAULT_MODEL_FILE in crates/runcell-llm/src/config.rs).
bench_model=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
bench_tasks=(--only sum-squares --only strawberry --only days-between --only csv-top-region
  --only csv-top-month --only csv-filter-count --only join-country-total --only json-mean-salary
  --only log-errors --only follow-squares --only plot-sales)
RUNCELL_BIN="$ROOT/target/release/runcell" "$ROOT/scripts/bench-agent.sh" embedded "$bench_model" "${bench_tasks[@]}"

step "DABench, a subset: the embedded model on other people's data"
# Two questions (a medium and a hard one) of InfiAgent-DABench through the real
# agent, when its data is on this machine (evaluation data, never in the
# repository): checks the harness against the real files, never a rate. The
# harness itself is tested without the data (tests/integration/bench_dabench.rs).
dabench_dir=${RUNCELL_DABENCH_DIR:-$ROOT/../shared/dabench}
if [ -f "$dabench_dir/da-dev-questions.jsonl" ]; then
  RUNCELL_BENCH=dabench RUNCELL_BIN="$ROOT/target/release/runcell" "$ROOT/scripts/bench-agent.sh" \
    embedded "$bench_model" --dabench-dir "$dabench_dir" --sample 2 --turn-timeout 240
else
  echo "no DABench data at $dabench_dir (RUNCELL_DABENCH_DIR): skipped"
fi

elapsed=$((SECONDS - started))
printf '\nrust: %s passed; end-to-end: %s passed, %s skipped, %s flaky (passed on a retry); %dm%02ds\n' \
  "$rust_passed" "$e2e_passed" "$e2e_skipped" "$e2e_flaky" $((elapsed / 60)) $((elapsed % 60))
printf 'summary: %s passed, 0 failed\n' $((rust_passed + e2e_passed))
