"""Validates downloaded notebooks with nbformat's own validator.

Usage: ipynb_check.py <notebook.ipynb>...
Prints `ok: <name> <n> cells` for each, after checking the shape runcell
promises: the title's heading, markdown questions and explanations (each
cell's role in metadata.runcell.role), code cells numbered 1, 2,
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
    # The title's heading, then the first question (quoted), each naming its role.
    title, question = nb.cells[0], nb.cells[1]
    assert title.cell_type == "markdown" and title.source.startswith("# "), title
    assert title.metadata["runcell"]["role"] == "title", title
    assert nb.metadata["runcell"]["title"] == title.source[2:], nb.metadata
    assert question.cell_type == "markdown" and question.source.startswith("> "), question
    assert question.metadata["runcell"]["role"] == "question", question
    kinds = {o.output_type for c in code for o in c.outputs}
    print(f"ok: {path} {len(nb.cells)} cells, outputs {sorted(kinds)}", flush=True)
