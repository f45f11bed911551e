"""The layout the explorer split promised (issue 21): modules of at most 600 lines, a widget class
under 300, a session that runs without ipywidgets, a tree model that does not import the engine,
a library core that does not import the exercise layer."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "widgets" / "pytree_lab"
MODULE_LINES = 600
WIDGET_CLASS_LINES = 300
# compat/tree_util.py mirrors JAX's one module. The others are over the budget today and may only
# shrink (their split is still to do): the number is their size when this test was written.
OVER_BUDGET = {
    "compat/tree_util.py": 700,
}


def _lines(path: pathlib.Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_is_above_its_line_budget():
    over = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        limit = OVER_BUDGET.get(name, MODULE_LINES)
        if _lines(path) > limit:
            over[name] = _lines(path)
    assert not over, f"modules above {MODULE_LINES} lines: {over}"


def test_the_explorer_widget_class_is_under_its_budget():
    tree = ast.parse((PACKAGE / "explorer" / "widget.py").read_text(encoding="utf-8"))
    (cls,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "StepExplorer"]
    assert cls.end_lineno - cls.lineno + 1 < WIDGET_CLASS_LINES


def _imports_in_a_fresh_python(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(PACKAGE.parent), "PATH": ""})
    return set(out.stdout.split())


def test_the_session_imports_no_ipywidgets():
    modules = _imports_in_a_fresh_python("import pytree_lab.explorer.session")
    assert "ipywidgets" not in modules and "anywidget" not in modules and "bqplot" not in modules


def test_the_tree_model_does_not_import_the_engine_and_the_core_not_the_exercises():
    modules = _imports_in_a_fresh_python("import pytree_lab.trees, pytree_lab._budget")
    assert "pytree_lab.engine" not in modules
    assert not any(m.startswith("pytree_lab.exercises") for m in modules)
    assert "jax" not in modules and "numpy" not in modules


def test_the_slider_path_is_written_down_in_the_explorer_docstring():
    import pytree_lab.explorer as explorer

    doc = explorer.__doc__
    path = doc[doc.index("A slider move, from the slider's value to the bars"):]
    steps = [line for line in path.splitlines() if line.strip()[:2] in {f"{i}." for i in range(1, 10)}]
    # the budget is 6 calls; the path is 8 today (said in the docstring): it may only shrink
    assert 1 <= len(steps) <= 8
