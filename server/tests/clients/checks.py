"""What the client checks beside this file share: one line per check, and
the first unexpected answer ends the script with what it was."""

import sys


def check(condition, what, got):
    if not condition:
        print(f"FAIL: {what}: {got!r}", file=sys.stderr)
        sys.exit(1)
    print(f"ok: {what}")
