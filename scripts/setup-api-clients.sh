#!/usr/bin/env bash
# Builds the venv of Python API clients the tests use (schemathesis, the MCP
# and E2B SDKs, Jupyter's clients and JupyterLab, the older E2B pair in a
# venv of its own) and installs E2B's JavaScript SDKs, outside the checkout.
# Idempotent: rebuilt only when scripts/api-test-requirements.txt changes.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
req="$root/scripts/api-test-requirements.txt"
cache="${RUNCELL_CACHE:-$HOME/.cache/runcell}"
venv="$cache/api-clients"

# The older E2B SDK pair, in a venv of its own (its pins clash with the
# newest pair's).
older_req="$root/scripts/api-test-requirements-e2b-older.txt"
older="$cache/api-clients-e2b-older"
if ! cmp -s "$older_req" "$older/runcell-requirements.txt" 2>/dev/null; then
    echo "==> building the older E2B SDKs' venv in $older"
    rm -rf "$older"
    python3 -m venv "$older"
    "$older/bin/pip" install --quiet --disable-pip-version-check -r "$older_req"
    "$older/bin/python" -c "import e2b, e2b_code_interpreter"
    cp "$older_req" "$older/runcell-requirements.txt"
fi

# E2B's JavaScript SDKs, from their committed lockfile.
js_src="$root/server/tests/clients/e2b-js"
js_dir="$cache/e2b-js"
if ! cmp -s "$js_src/package-lock.json" "$js_dir/package-lock.json" 2>/dev/null; then
    echo "==> installing E2B's JavaScript SDKs in $js_dir"
    rm -rf "$js_dir"
    mkdir -p "$js_dir"
    cp "$js_src/package.json" "$js_src/package-lock.json" "$js_dir/"
    (cd "$js_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi

if cmp -s "$req" "$venv/runcell-requirements.txt" 2>/dev/null; then
    exit 0
fi
echo "==> building the API test clients' venv in $venv"
# Built in place (a venv's scripts name its path); the stamp is written last,
# so an interrupted build is redone.
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
"$venv/bin/python" -c "import schemathesis, mcp, e2b, e2b_code_interpreter, jupyter_server, jupyterlab, nbclient, nbformat, websocket, jupyter_kernel_test"
cp "$req" "$venv/runcell-requirements.txt"
echo "==> API test clients ready in $venv"
