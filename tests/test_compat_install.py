"""`install_as_jax`: real JAX wins where it imports; otherwise lesson code gets the Lite engine.

The "no JAX" kernels run in subprocesses with an import blocker, so this process keeps its real
jax and `sys.modules` is never edited here.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

BLOCKER = '''
import importlib.abc, sys
class _Blocked(importlib.abc.MetaPathFinder):
    """Behaves as if these top-level packages were not installed."""
    def __init__(self, names):
        self.names = names
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Blocked(BLOCKED))
'''

LESSON = '''
import jax
import jax.numpy as jnp
from jax.tree_util import keystr
from jax.flatten_util import ravel_pytree
params = {"weight": jnp.array([1., -1.]), "bias": jnp.array(0.)}
x = jnp.array([2., 1.])
def loss(p):
    prediction = jnp.dot(p["weight"], x) + p["bias"]
    return (prediction - 3.) ** 2
value, grads = jax.value_and_grad(loss)(params)
updated = jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)
print("Before/after:", float(value), float(loss(updated)))
print([keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(grads)[0]])
print(ravel_pytree(grads)[0].tolist())
'''


def run_kernel(blocked: set[str], *parts: str) -> list[str]:
    """Run code in a fresh interpreter where the `blocked` packages cannot be imported."""
    code = f"BLOCKED = {sorted(blocked)!r}\n" + BLOCKER + "".join(textwrap.dedent(p) for p in parts)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


@pytest.mark.parametrize(
    "blocked",
    [{"jax", "jaxlib"}, {"jaxlib"}],  # no JAX at all (Pyodide), or jax without a working jaxlib
    ids=["no-jax", "jax-without-jaxlib"],
)
def test_without_real_jax_lesson_code_runs_on_the_lite_engine(blocked):
    lines = run_kernel(
        blocked,
        '''
        from pytree_lab_lite import install_as_jax, active_engine
        print(active_engine())
        print(install_as_jax(), install_as_jax())
        ''',
        LESSON,
        '''
        print(jax.__version__)
        print(jnp.__name__, jax.tree.__name__)
        print(sorted(m for m in sys.modules if m.split(".")[0] == "jaxlib"))
        ''',
    )
    assert lines == [
        "None",
        "lite lite",
        "Before/after: 4.0 0.6399999260902405",
        str(["['bias']", "['weight']"]),
        "[-4.0, -8.0, -4.0]",
        "0.1.0+pytree-lab-lite",
        "pytree_lab_lite.jax.numpy pytree_lab_lite.jax.tree",
        "[]",
    ]


def test_the_engine_seam_labels_the_lite_engine_honestly():
    lines = run_kernel(
        {"jax", "jaxlib"},
        '''
        from pytree_lab_lite import install_as_jax
        install_as_jax()
        from pytree_lab.engine import get_engine
        engine = get_engine()
        print(engine.is_lite, "Lite" in engine.name, "JAX" not in engine.name.split()[0])
        ''',
    )
    assert lines == ["True True True"]


def test_real_jax_wins_where_it_imports():
    lines = run_kernel(
        set(),
        '''
        from pytree_lab_lite import install_as_jax
        print(install_as_jax())
        import jax
        print(jax.__name__, "lite" in jax.__version__, type(jax.numpy.ones(1)).__module__.startswith("jax"))
        ''',
    )
    assert lines == ["jax", "jax False True"]


def test_in_this_process_real_jax_is_kept():
    import jax

    from pytree_lab_lite import active_engine, install_as_jax

    before = dict(sys.modules)
    assert install_as_jax() == "jax" == active_engine()
    assert sys.modules["jax"] is jax and not getattr(jax, "__pytree_lab_lite__", False)
    assert {k: v for k, v in sys.modules.items() if k.startswith("jax")} == {
        k: v for k, v in before.items() if k.startswith("jax")
    }


def test_importing_compat_loads_neither_numpy_nor_autograd():
    lines = run_kernel(
        {"numpy", "autograd", "jax", "jaxlib"},  # a fresh Lite kernel before numpy is loaded
        '''
        import pytree_lab_lite
        from pytree_lab_lite import tree_util
        flat, treedef = tree_util.tree_flatten_with_path({"layer": {"weight": [1.0, 2.0], "bias": 0.0}, "name": None})
        print([tree_util.keystr(p) for p, _ in flat], treedef)
        ''',
    )
    assert lines == [
        "[\"['layer']['bias']\", \"['layer']['weight'][0]\", \"['layer']['weight'][1]\"] "
        "PyTreeDef({'layer': {'bias': *, 'weight': [*, *]}, 'name': None})"
    ]
