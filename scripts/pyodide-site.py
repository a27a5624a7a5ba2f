#!/usr/bin/env python3
"""Assembles the Browser sandbox's Pyodide for the site: the runtime files of
the npm package, the vendored pure-Python wheels, and a lock file that names
exactly those wheels (with their real hashes), so that Pyodide loads them by
name and never asks for a wheel that is not there.

usage: pyodide-site.py NPM_PYODIDE_DIR WHEELS_DIR REQUIREMENTS OUT_DIR
Prints the directory name it used under OUT_DIR (`<version>-<hash>`): the
path changes whenever a file does, so the files can be cached for good.
"""

import hashlib
import json
import shutil
import sys
from pathlib import Path

RUNTIME = [
    "pyodide.mjs",
    "pyodide.asm.mjs",
    "pyodide.asm.wasm",
    "python_stdlib.zip",
]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pinned(requirements: Path) -> dict[str, str]:
    """name -> version from `name==version --hash=...` lines."""
    out = {}
    for line in requirements.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        spec = line.split()[0]
        name, _, version = spec.partition("==")
        out[name.lower()] = version
    return out


def main() -> None:
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    npm, wheels, requirements, out = (Path(a) for a in sys.argv[1:])
    lock = json.loads((npm / "pyodide-lock.json").read_text())
    wanted = pinned(requirements)
    packages = {}
    for name, version in sorted(wanted.items()):
        entry = lock["packages"].get(name)
        if entry is None:
            sys.exit(f"{name} is not in Pyodide's lock file")
        if entry["version"] != version:
            sys.exit(f"{name}: Pyodide names {entry['version']}, the pin says {version}")
        if not entry["file_name"].endswith("-none-any.whl"):
            sys.exit(f"{name} is not pure Python: {entry['file_name']}")
        missing = [d for d in entry["depends"] if d not in wanted]
        if missing:
            sys.exit(f"{name} needs {', '.join(missing)}: pin them too")
        wheel = wheels / entry["file_name"]
        if not wheel.is_file():
            sys.exit(f"{wheel} is missing: run scripts/setup.sh")
        packages[name] = dict(entry, sha256=sha256(wheel))
    lock["packages"] = packages

    body = json.dumps(lock, indent=1, sort_keys=True).encode()
    digest = hashlib.sha256(body)
    for name in RUNTIME:
        digest.update(sha256(npm / name).encode())
    version = json.loads((npm / "package.json").read_text())["version"]
    name = f"{version}-{digest.hexdigest()[:10]}"
    target = out / name
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for file in RUNTIME:
        shutil.copyfile(npm / file, target / file)
    for entry in packages.values():
        shutil.copyfile(wheels / entry["file_name"], target / entry["file_name"])
    (target / "pyodide-lock.json").write_bytes(body)
    print(name)


if __name__ == "__main__":
    main()
