"""Validates downloaded notebooks with nbformat's own validator.

Usage: ipynb_check.py <notebook.ipynb>...
Prints `ok: <name> <n> cells` for each, after checking the shape runcell
promises: markdown questions and explanations, code cells numbered 1, 2,
... in order, with their outputs.
"""

import sys

import nbformat

for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as f:
        nb = nbformat.read(f, as_version=4)
    nbformat.validate(nb)
    assert nb.nbformat == 4 and nb.nbformat_minor >= 5, (nb.nbformat, nb.nbformat_minor)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), code
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("> "), nb.cells[0]
    kinds = {o.output_type for c in code for o in c.outputs}
    print(f"ok: {path} {len(nb.cells)} cells, outputs {sorted(kinds)}", flush=True)
