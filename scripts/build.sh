#!/usr/bin/env bash
# Builds the release site (hydrate bundle + styles + public files) into
# target/site and the `runcell` server into target/release/runcell.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

# The browser bundle and the server compile at the same time, each in its
# own build directory (one cargo cannot build two profiles at once, and two
# would wait on each other's lock): each has a long stretch on one core (the
# bundle's whole-program optimisation, the server crate's last steps) that the
# other fills. They share no artifacts anyway (other target, other profile).
wasm_target=$TARGET_DIR/browser
wasm_log=$(mktemp)
trap 'rm -f "$wasm_log"' EXIT
# Every crate both builds need is downloaded first, once: two cargos that
# fetch at once wait on each other's package-cache lock, and the bundle's
# build then started only when the server's was done.
step "fetching the crates both builds use"
cargo fetch
step "building the browser bundle (wasm-release) and the server (release), side by side"
cargo build -p frontend --lib --target wasm32-unknown-unknown --profile wasm-release \
  --target-dir "$wasm_target" >"$wasm_log" 2>&1 &
wasm_pid=$!
if ! cargo build -p runcell --release; then
  kill "$wasm_pid" 2>/dev/null || true
  wait "$wasm_pid" 2>/dev/null || true
  die "building the server failed"
fi
if ! wait "$wasm_pid"; then
  cat "$wasm_log" >&2
  die "building the browser bundle failed"
fi
grep -v '^ *Compiling ' "$wasm_log" >&2 || true
if [ "$TARGET_DIR/release/runcell" -ef "$ROOT/target/release/runcell" ]; then :; else
  mkdir -p "$ROOT/target/release"
  # Copied beside it, then renamed over it: a server still running the old
  # binary keeps its file ("Text file busy" for a copy onto it).
  cp "$TARGET_DIR/release/runcell" "$ROOT/target/release/runcell.new"
  mv -f "$ROOT/target/release/runcell.new" "$ROOT/target/release/runcell"
fi

step "assembling the site"

stage=$ROOT/target/site.new
rm -rf "$stage"
mkdir -p "$stage/pkg"
wasm-bindgen --target web --no-typescript --out-dir "$stage/pkg" --out-name runcell \
  "$wasm_target/wasm32-unknown-unknown/wasm-release/frontend.wasm"
"$ROOT/scripts/node_modules/.bin/wasm-opt" -Oz \
  --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
  --enable-mutable-globals --enable-reference-types --enable-multivalue \
  -o "$stage/pkg/runcell_bg.wasm" "$stage/pkg/runcell_bg.wasm"
# One stylesheet: main.css first, then each part's own file in name order.
cat "$ROOT/style/main.css" $(find "$ROOT/style" -maxdepth 1 -name '*.css' ! -name main.css | sort) >"$stage/pkg/runcell.css"
cp -R "$ROOT/public/." "$stage/"
# The Browser sandbox: Pyodide's runtime and the vendored wheels, under a
# directory named by their content (served as immutable).
pyodide=$(python3 "$ROOT/scripts/pyodide-site.py" "$ROOT/scripts/node_modules/pyodide" \
  "${RUNCELL_CACHE:-$HOME/.cache/runcell}/pyodide-wheels" "$ROOT/scripts/pyodide-wheels.txt" "$stage/pyodide")
gzip -9 -k -f "$stage/pyodide/$pyodide/"*.{wasm,mjs,json}
# The chart libraries interactive outputs are drawn with, from runcell's
# own origin (see public/chart-frame.js).
mkdir -p "$stage/charts"
cp "$ROOT/scripts/node_modules/plotly.js-strict-dist-min/plotly-strict.min.js" \
  "$ROOT/scripts/node_modules/vega/build/vega.min.js" \
  "$ROOT/scripts/node_modules/vega-lite/build/vega-lite.min.js" \
  "$ROOT/scripts/node_modules/vega-embed/build/vega-embed.min.js" "$stage/charts/"
gzip -9 -k -f "$stage/charts/"*.js
# Served as-is to browsers that accept gzip.
gzip -9 -k -f "$stage/pkg/runcell_bg.wasm" "$stage/pkg/runcell.js" "$stage/pkg/runcell.css"
# ...and brotli, smaller still, to browsers that accept it.
node "$ROOT/scripts/brotli.mjs" "$stage/pkg/runcell_bg.wasm" "$stage/pkg/runcell.js" "$stage/pkg/runcell.css"
rm -rf "$SITE_DIR"
mv "$stage" "$SITE_DIR"

wasm=$SITE_DIR/pkg/runcell_bg.wasm
say "built: target/release/runcell, target/site (wasm $(stat -c %s "$wasm") B, gzip $(stat -c %s "$wasm.gz") B, brotli $(stat -c %s "$wasm.br") B; pyodide/$pyodide $(du -sk "$SITE_DIR/pyodide" | cut -f1) KiB)"
