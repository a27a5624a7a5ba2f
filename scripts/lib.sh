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
