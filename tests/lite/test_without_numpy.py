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

from pytree_lab.compat import lite_kernel
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
    "import jax\nimport jax.numpy as jnp\nfrom pytree_lab import PytreeDiagram, StepExplorer, describe, diagnose, get_engine\n"
    "print('imported', jax.__version__.endswith('+pytree-lab-lite'))",
    'params = {"weight": jnp.array([1., -1.]), "bias": jnp.array(0.)}\nprint(params)\nprint(describe(params).counts_line())',
    "d = PytreeDiagram(params)\nprint(len(d.rows), sorted(jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(params)[0]))",
    "print(jax.tree.map(lambda v: 2 * v, {'a': 1.0, 'b': [2.0, 3.0]}))\nleaves, definition = jax.tree.flatten(params)\nprint(leaves, definition.num_leaves)",
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
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(cells)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert line is not None, proc.stdout + proc.stderr
    return json.loads(line[len("RESULT"):])


def test_lesson_cells_without_numpy():
    out = run(LESSON_CELLS)
    imported, params, diagram, trees, grad, name, np_import, explorer, dot, arith, zero, mods, typo, np_name, engine = out

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
    assert grad["stderr"].startswith("jax.value_and_grad needs numpy, and it could not be downloaded in this browser "
                                     "(the request was refused (test)).")
    assert name["stderr"] == ("name 'grads' is not defined (it is set by an earlier cell that needed numpy, "
                              "which could not be downloaded in this browser).\n")
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
    assert engine["stdout"] == ("pytree-lab Lite engine 0.1.0+pytree-lab-lite (tree operations only, on plain "
                                "Python values: numpy could not be loaded here; JAX cannot run in the browser)\n")


def test_regular_kernel_without_numpy_still_refuses_the_lite_engine():
    """Outside the browser, no stand-ins: the Lite engine needs numpy, as the README says."""
    code = textwrap.dedent('''
        import sys
        sys.modules["numpy"] = None
        try:
            from pytree_lab.compat import jax
        except ImportError as err:
            print("refused", type(err).__name__)
    ''')
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.stdout.strip() == "refused ModuleNotFoundError", proc.stdout + proc.stderr
