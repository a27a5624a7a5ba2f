#!/usr/bin/env python3
"""The workspace's crate map, checked: the domain crates build without any
UI or web framework, and each reaches only the runcell crates beneath it.

For every domain crate this reads what `cargo tree -p CRATE -e normal`
resolves (its own features only, no dev-dependencies, as a build of that
crate alone would) and fails when it reaches:
- a UI or web framework: the `app` and `frontend` crates, Leptos, axum,
  utoipa-axum or rmcp (the server crate's business);
- a runcell crate that is not listed beneath it below (so that a layer
  never leans on one above it, and `runcell-protocol` stays at the bottom).

HTTP clients' own parts (hyper, tower, reqwest) are allowed: the LLM
client and the package index speak HTTP, they do not host a web app.

Usage: scripts/check-crates.py   (exit 1 on a finding)
"""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What no domain crate may reach: the page, its framework, the web server.
FRAMEWORKS = {
    "app", "frontend", "leptos", "leptos_axum", "leptos_meta", "leptos_router",
    "leptos_macro", "axum", "axum-core", "axum-macros", "utoipa-axum", "rmcp",
    "runcell-server", "runcell",
}

# Each domain crate and the runcell crates it may reach (directly or not).
BENEATH = {
    "runcell-protocol": set(),
    "runcell-core": {"runcell-protocol"},
    "runcell-store": {"runcell-protocol", "runcell-core"},
    "runcell-packages": {"runcell-core", "runcell-protocol"},
    "runcell-sandbox": {"runcell-protocol", "runcell-core", "runcell-packages"},
    "runcell-llm": {"runcell-protocol", "runcell-core"},
    "runcell-embedded": {"runcell-protocol", "runcell-core", "runcell-llm"},
    "runcell-agent": {
        "runcell-protocol", "runcell-core", "runcell-store", "runcell-packages",
        "runcell-sandbox", "runcell-llm",
    },
}


def reached(crate):
    """The package names `crate` reaches through normal dependencies."""
    out = subprocess.run(
        ["cargo", "tree", "-p", crate, "-e", "normal", "--prefix", "none",
         "--format", "{p}", "--offline"],
        cwd=ROOT, capture_output=True, text=True,
    )
    if out.returncode != 0:
        # Offline fails only when something is not fetched yet.
        out = subprocess.run(
            ["cargo", "tree", "-p", crate, "-e", "normal", "--prefix", "none", "--format", "{p}"],
            cwd=ROOT, capture_output=True, text=True, check=True,
        )
    names = set()
    for line in out.stdout.splitlines():
        name = line.split(" ", 1)[0].strip()
        if name and name != crate:
            names.add(name)
    return names


def main():
    findings = []
    for crate, allowed in BENEATH.items():
        names = reached(crate)
        for name in sorted(names & FRAMEWORKS):
            findings.append(f"{crate} reaches {name} (a UI or web framework)")
        for name in sorted(n for n in names if n.startswith("runcell") and n not in allowed):
            findings.append(f"{crate} reaches {name}, which is not beneath it")
    for finding in findings:
        print(f"check-crates: {finding}", file=sys.stderr)
    if findings:
        sys.exit(1)
    print(f"check-crates: {len(BENEATH)} domain crates, none reaches a UI or web framework")


if __name__ == "__main__":
    main()
