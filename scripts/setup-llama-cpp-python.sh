#!/usr/bin/env bash
# Builds llama-cpp-python's OpenAI-compatible server once, outside the
# checkout, for the LLM client tests and the llama.cpp side of `runcell bench`.
# There is no binary wheel for this machine, so pip builds llama.cpp from the
# sdist (6-16 min). Idempotent: an existing, importable build is kept.
#
# Never let llama.cpp target the build machine's CPU: this VM's CPUID
# advertises AMX, which the guest cannot run (SIGILL on the first request).
set -euo pipefail

version=0.3.36
cache="${RUNCELL_CACHE:-$HOME/.cache/runcell}"
venv="$cache/llama-cpp-python-$version"

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
    echo "llama-cpp-python $version: ready in $venv"
    exit 0
fi

echo "llama-cpp-python $version: building into $venv (takes 6-16 minutes)"
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --upgrade pip
CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_OPENMP=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    "$venv/bin/pip" install --quiet --no-cache-dir "llama-cpp-python[server]==$version"
"$venv/bin/python" -c 'import llama_cpp.server'
echo "llama-cpp-python $version: ready in $venv"
