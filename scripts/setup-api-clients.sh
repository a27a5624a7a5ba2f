#!/usr/bin/env bash
# Builds the venv of Python API clients the tests use (schemathesis, the MCP
# and E2B SDKs), outside the checkout. Idempotent: rebuilt only when
# scripts/api-test-requirements.txt changes.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
req="$root/scripts/api-test-requirements.txt"
cache="${RUNCELL_CACHE:-$HOME/.cache/runcell}"
venv="$cache/api-clients"

if cmp -s "$req" "$venv/runcell-requirements.txt" 2>/dev/null; then
    exit 0
fi
echo "==> building the API test clients' venv in $venv"
# Built in place (a venv's scripts name its path); the stamp is written last,
# so an interrupted build is redone.
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
"$venv/bin/python" -c "import schemathesis, mcp, e2b, e2b_code_interpreter, jupyter_server, nbclient, nbformat, websocket"
cp "$req" "$venv/runcell-requirements.txt"
echo "==> API test clients ready in $venv"
