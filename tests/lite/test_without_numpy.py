"""The Lite kernel without numpy, reproduced in CPython: numpy, autograd, bqplot and jax are
made unimportable, and `lite_kernel.degrade` is applied to a real IPython shell, as the setup
cell does in the browser when numpy cannot be downloaded. The browser itself is tested in
test_lite_offline.py; this pins the messages and values cell by cell, quickly."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r'''
import json, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("numpy", "jax", "jaxlib", "autograd", "bqplot", "pandas", "optax"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())

from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
shell = InteractiveShell.instance()

from pytree_lab_site import lite_kernel
lite_kernel.degrade("the request was refused (test)", shell=shell)

cells = json.loads(sys.argv[1])
out = []
for code in cells:
    with capture_output() as cap:
        result = shell.run_cell(code)
    out.append({"stdout": cap.stdout, "stderr": cap.stderr,
                "error": type(result.error_in_exec).__name__ if result.error_in_exec else None})
print("RESULT" + json.dumps(out))
'''

LESSON_CELLS = [
    # the pytree lesson's opening cells, as written in content/01_pytrees
    "import jax\nimport jax.numpy as jnp\n"
    "from pytree_lab import PytreeDiagram, StepExplorer, describe, diagnose, get_engine\n"
    "print('imported', jax.__version__.endswith('+pytree-lab-lite'))",
    'params = {"weight": jnp.array([1., -1.]), "bias": jnp.array(0.)}\n'
    "print(params)\nprint(describe(params).counts_line())",
    "d = PytreeDiagram(params)\n"
    "print(len(d.rows), sorted(jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(params)[0]))",
    "print(jax.tree.map(lambda v: 2 * v, {'a': 1.0, 'b': [2.0, 3.0]}))\n"
    "leaves, definition = jax.tree.flatten(params)\nprint(leaves, definition.num_leaves)",
    "value, grads = jax.value_and_grad(lambda p: 0.0)(params)",
    "print(grads)",
    "import numpy as np",
    "StepExplorer()",
    "jnp.dot(params['weight'], [2.0, 1.0])",
    "updated = {k: v - 0.05 * v for k, v in params.items()}",
    "1 / 0",
    "import sys\nprint('numpy' in sys.modules, 'autograd' in sys.modules)",
    "print(gradz)",  # a typo: a real NameError, not numpy's absence
    "print(np.zeros(2))",  # np was left undefined by the failed `import numpy as np`
    "print(get_engine().name)",
]


def run(cells):
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(cells)], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert line is not None, proc.stdout + proc.stderr
    return json.loads(line[len("RESULT") :])


def test_lesson_cells_without_numpy():
    out = run(LESSON_CELLS)
    imported, params, diagram, trees, grad, name, np_import, explorer, dot, arith, zero, mods, typo, np_name, engine = (
        out
    )

    assert imported["stdout"] == "imported True\n" and imported["error"] is None
    # jnp.array gives plain values; the tree is described and drawn from them
    assert params["stdout"].splitlines()[0] == "{'weight': Array([1.0, -1.0]), 'bias': 0.0}"
    # two leaves, as in JAX: the weight vector is one leaf (its values as plain Python)
    assert params["stdout"].splitlines()[1].startswith("2 leaves"), params["stdout"]
    assert diagram["stdout"].endswith("[\"['bias']\", \"['weight']\"]\n") and diagram["error"] is None, diagram
    # jax.tree / jax.tree_util work on plain values
    assert trees["stdout"].splitlines() == ["{'a': 2.0, 'b': [4.0, 6.0]}", "[0.0, Array([1.0, -1.0])] 2"]

    # cells that need numpy: one short line on stderr each, no traceback
    for cell in (grad, name, np_import, explorer, dot, arith):
        assert cell["stderr"].count("\n") == 1, cell
        assert "Traceback" not in cell["stderr"] and cell["stdout"] == ""
    assert grad["stderr"].startswith(
        "jax.value_and_grad needs numpy, and it could not be downloaded in this browser "
        "(the request was refused (test))."
    )
    assert name["stderr"] == (
        "name 'grads' is not defined (it is set by an earlier cell that needed numpy, "
        "which could not be downloaded in this browser).\n"
    )
    assert np_name["stderr"].startswith("name 'np' is not defined (it is set by an earlier cell that needed numpy")
    assert np_import["stderr"].startswith("numpy is not available: numpy could not be downloaded")
    assert explorer["stderr"].startswith("pytree_lab.StepExplorer needs numpy")
    assert dot["stderr"].startswith("jax.numpy.dot needs numpy")
    assert arith["stderr"].startswith("arithmetic on jax.numpy arrays needs numpy")

    # any other error keeps its usual traceback
    assert "ZeroDivisionError" in zero["stdout"] + zero["stderr"] and zero["error"] == "ZeroDivisionError"
    assert mods["stdout"] == "False False\n"
    # a name no numpy cell would have set is a typo: the usual traceback, no talk of numpy
    assert typo["error"] == "NameError" and "gradz" in typo["stdout"] + typo["stderr"]
    assert "Traceback" in typo["stdout"] + typo["stderr"] or "---" in typo["stdout"] + typo["stderr"]
    assert "numpy" not in typo["stdout"] + typo["stderr"]
    # the engine names what it is without numpy
    assert engine["stdout"] == (
        "pytree-lab Lite engine 0.1.0+pytree-lab-lite (tree operations only, on plain "
        "Python values: numpy could not be loaded here; JAX cannot run in the browser)\n"
    )


def test_import_optax_without_numpy_is_one_line_and_the_lesson_goes_on():
    """Lesson 01's Adam cell says `import optax` in both kernels: without numpy (no Lite optax
    either) it gets the one line, not a traceback, and the names it would bind are numpy's absence."""
    optax_cell, later = run(["import optax\nfrom pytree_lab import StepExplorer", "optax.adam(0.1)"])
    assert optax_cell["stderr"].count("\n") == 1 and "Traceback" not in optax_cell["stderr"], optax_cell
    assert optax_cell["stderr"].startswith("optax is not available: numpy could not be downloaded")
    assert "set by an earlier cell that needed numpy" in later["stderr"], later


def test_regular_kernel_without_numpy_still_refuses_the_lite_engine():
    """Outside the browser, no stand-ins: the Lite engine needs numpy, as the README says."""
    code = textwrap.dedent('''
        import sys
        sys.modules["numpy"] = None
        try:
            from pytree_lab_lite import jax
        except ImportError as err:
            print("refused", type(err).__name__)
    ''')
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.stdout.strip() == "refused ModuleNotFoundError", proc.stdout + proc.stderr


# ------------------------------------------------- the lesson's arrays without numpy, next to JAX

ARRAYS_SCRIPT = (
    SCRIPT.split("cells = json.loads")[0]
    + r'''
import jax, jax.numpy as jnp
from pytree_lab import PytreeDiagram, describe, diagnose
'''
    + "exec(sys.argv[1])\n"
)

ARRAYS_CODE = r'''
import json
params = {"weight": jnp.array([1., -1.]), "bias": jnp.array(0.)}
wrong = {"weight": jnp.array([1., 2., 3.]), "bias": jnp.array(0.)}
others = {"ints": jnp.array([[1, 2], [3, 4]]), "flags": jnp.array([True, False]),
          "mixed": jnp.array([1, 2.5]), "column": jnp.array([[0.5], [-2.0], [3.0]]),
          "typed": jnp.array([1, 2], dtype=jnp.float32), "big": jnp.array([float(i) for i in range(40)])}
out = {
    "describe": describe(params).text(),
    "counts": describe(params).counts_line(),
    "diagnose": diagnose(params, wrong).message,
    "rows": [(r["p"], [(c["ty"], c["v"]) for c in r["c"]]) for r in PytreeDiagram(params).rows],
    "others": describe(others, "others").text(),
    "shapes": {k: [list(v.shape), str(v.dtype), v.size, v.ndim, v.tolist()] for k, v in others.items()},
    "row": [params["weight"][0].tolist(), others["ints"][1].tolist(), others["ints"][1, 0].tolist(),
            others["column"][1:].tolist()],
}
print("RESULT" + json.dumps(out))
'''


def test_lesson_arrays_without_numpy_are_described_and_diagnosed_as_jax_does():
    """`jnp.array([1., -1.])` without numpy is float32[2] with its values, counted as 2 numbers,
    and a wrong gradient tree is diagnosed by shape: the same text real JAX gives, line for line."""
    proc = subprocess.run(
        [sys.executable, "-c", ARRAYS_SCRIPT, ARRAYS_CODE], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert line is not None, proc.stdout + proc.stderr
    lite = json.loads(line[len("RESULT") :])

    assert lite["describe"] == (
        "params\n├── weight: float32[2]\n└── bias: float32[]\n2 leaves, 3 numerical parameter values"
    )
    assert lite["rows"] == [["['weight']", [["float32[2]", "[1, -1]"]]], ["['bias']", [["float32[]", "0"]]]]
    assert lite["diagnose"].startswith("['weight'] has shape (2,) in params but (3,) in the gradient tree")
    assert lite["shapes"]["ints"] == [[2, 2], "int32", 4, 2, [[1, 2], [3, 4]]]
    assert lite["shapes"]["flags"] == [[2], "bool", 2, 1, [True, False]]
    assert lite["shapes"]["mixed"] == [[2], "float32", 2, 1, [1.0, 2.5]]
    assert lite["shapes"]["typed"] == [[2], "float32", 2, 1, [1.0, 2.0]]
    assert lite["row"] == [1.0, [3, 4], 3, [[-2.0], [3.0]]]

    # real JAX, in this process: the same texts
    import jax.numpy as jnp

    from pytree_lab import PytreeDiagram, describe, diagnose

    params = {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}
    wrong = {"weight": jnp.array([1.0, 2.0, 3.0]), "bias": jnp.array(0.0)}
    others = {
        "ints": jnp.array([[1, 2], [3, 4]]),
        "flags": jnp.array([True, False]),
        "mixed": jnp.array([1, 2.5]),
        "column": jnp.array([[0.5], [-2.0], [3.0]]),
        "typed": jnp.array([1, 2], dtype=jnp.float32),
        "big": jnp.array([float(i) for i in range(40)]),
    }
    assert lite["describe"] == describe(params).text()
    assert lite["counts"] == describe(params).counts_line()
    assert lite["diagnose"] == diagnose(params, wrong).message
    assert lite["rows"] == [[r["p"], [[c["ty"], c["v"]] for c in r["c"]]] for r in PytreeDiagram(params).rows]
    assert lite["others"] == describe(others, "others").text()
    assert "big: float32[40]" in lite["others"]
    for key, value in others.items():
        assert lite["shapes"][key] == [
            list(value.shape),
            str(value.dtype),
            int(value.size),
            value.ndim,
            value.tolist(),
        ], key


NOTEBOOK_SCRIPT = (
    SCRIPT.split("cells = json.loads")[0]
    + r'''
import os, nbformat
nb = nbformat.read(sys.argv[1], 4)
os.chdir(sys.argv[2])
out = {}
for cell in nb.cells[1:]:
    if cell.cell_type != "code":
        continue
    with capture_output() as cap:
        result = shell.run_cell(cell.source)
    out[cell.id] = {"stdout": cap.stdout, "stderr": cap.stderr,
                    "error": type(result.error_in_exec or result.error_before_exec).__name__
                    if (result.error_in_exec or result.error_before_exec) else None,
                    "display": [o.data.get("text/plain", "") for o in cap.outputs]}
    if cell.id == "imports":
        out["defined"] = sorted(n for n in ("describe", "check_cell", "try_function", "save_evidence",
                                            "PytreeDiagram", "get_engine", "ravel_pytree", "jnp")
                                if n in shell.user_ns)
        out["magics"] = sorted(shell.magics_manager.magics["cell"])
print("RESULT" + json.dumps(out))
'''
)


def run_notebook(name: str, workdir: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", NOTEBOOK_SCRIPT, str(ROOT / "content" / name), str(workdir)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert line is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(line[len("RESULT") :])


def test_packed_notebook_imports_cell_defines_its_tools_without_numpy(tmp_path):
    """02's imports cell: `import numpy` fails offline, yet describe, check_cell, try_function,
    save_evidence and %%exercise exist, so the exercise cell runs and says in one line why it waits."""
    out = run_notebook("02_packed_parameters.ipynb", tmp_path)
    assert out["defined"] == [
        "PytreeDiagram",
        "check_cell",
        "describe",
        "get_engine",
        "jnp",
        "ravel_pytree",
        "save_evidence",
        "try_function",
    ]
    assert "exercise" in out["magics"]
    assert out["imports"]["stdout"].startswith("computing with pytree-lab Lite engine")
    assert out["imports"]["stderr"].startswith("numpy is not available") and out["imports"]["stderr"].count("\n") == 1
    # the packed vector is one float32[3] leaf with its three values, as in JAX
    assert out["one-leaf"]["stdout"] == "flat_params: float32[3]\n1 leaf, 3 numerical parameter values\n"
    assert out["one-leaf"]["stderr"].startswith("jax.grad needs numpy")  # then its gradient waits, in one line
    exercise = out["exercise-grad-over-flat-params"]
    assert "UsageError" not in exercise["stdout"] + exercise["stderr"] and "Traceback" not in exercise["stderr"]
    # the evidence file is saved
    assert out["evidence"]["error"] is None, out["evidence"]
    assert (tmp_path / "packed-parameters-evidence.md").exists()
    for cell_id, cell in out.items():
        if isinstance(cell, dict) and "stderr" in cell:
            assert "Traceback" not in cell["stderr"] + cell["stdout"], (cell_id, cell)


def test_lesson_without_numpy_draws_its_trees_and_saves_its_evidence(tmp_path):
    """Lesson 01 offline: the diagram cells that need no gradient show the lesson's own shapes
    and counts; the evidence (predictions, quiz answers) is saved though the gradient cells wait."""
    out = run_notebook("01_pytrees.ipynb", tmp_path)
    assert out["params"]["stdout"] == (
        "params\n├── weight: float32[2]\n└── bias: float32[]\n2 leaves, 3 numerical parameter values\n"
    )
    assert out["params-diagram"]["error"] is None
    # the diagram's text form (its repr, what the shell prints for it)
    assert out["params-diagram"]["stdout"].splitlines()[-3:] == [
        "├── weight: float32[2]",
        "└── bias: float32[]",
        "2 leaves, 3 numerical parameter values",
    ]
    # a cell that needs a gradient says why in one line
    assert out["value-and-grad"]["stderr"].startswith("jax.value_and_grad needs numpy")
    assert out["value-and-grad"]["stderr"].count("\n") == 1
    # the record of the diagram waits; saving does not
    assert out["evidence"]["stderr"].startswith("name 'grads' is not defined (it is set by an earlier cell")
    assert out["evidence-save"]["error"] is None, out["evidence-save"]
    assert out["evidence-save"]["stdout"].startswith("Saved pytree-lesson-evidence.md and pytree-lesson-evidence.json")
    saved = json.loads((tmp_path / "pytree-lesson-evidence.json").read_text())
    assert saved["format"] == "pytree-lab-evidence/1"
    assert sorted(saved["expected"]) == ["nested_scale_grad", "repair_update", "squared_norm"]
    assert saved["outputs"] == []  # the gradient diagram was not made, so not recorded


# ------------------------------------------------- the exercises' integrity check on the Lite engine

INTEGRITY_CELLS = [
    "import jax, jax.numpy as jnp\n"
    "print(jax.grad is jax.grad, jax.value_and_grad is jax.value_and_grad, jax.jit is jax.jit,"
    " jax.vmap is jax.vmap, jax.numpy is jax.numpy)",
]


@pytest.mark.parametrize("blocked", [("jax", "jaxlib"), ("numpy", "jax", "jaxlib", "autograd", "bqplot", "pandas")])
def test_the_lite_engines_public_functions_are_the_same_objects_at_every_access(blocked):
    """Issue 33: the Lite engine's public functions are the same objects at every access (with
    numpy, and as stand-ins without it)."""
    script = SCRIPT.replace(
        '("numpy", "jax", "jaxlib", "autograd", "bqplot", "pandas", "optax")', repr(blocked + ("optax",))
    )
    if "numpy" not in blocked:  # numpy there: the setup cell's plain install, no degrading
        script = script.replace(
            'lite_kernel.degrade("the request was refused (test)", shell=shell)',
            "from pytree_lab_lite import install_as_jax; assert install_as_jax() == 'lite'",
        )
    proc = subprocess.run(
        [sys.executable, "-c", script, json.dumps(INTEGRITY_CELLS)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert line is not None, proc.stdout + proc.stderr
    (same,) = json.loads(line[len("RESULT") :])
    assert same == {"stdout": "True True True True True\n", "stderr": "", "error": None}, same
