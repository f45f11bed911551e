"""The JupyterLite promise: `import pytree_lab`, `describe` and `PytreeDiagram` on plain Python
containers work in a kernel with neither jax nor numpy (run in a fresh interpreter where
importing either fails)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCKER = textwrap.dedent(
    """
    import sys
    class _Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("jax", "jaxlib", "numpy"):
                raise ImportError(f"{name} is not installed here")
    sys.meta_path.insert(0, _Block())
    """
)


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-W", "error", "-c", BLOCKER + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_describe_and_diagram_need_neither_jax_nor_numpy():
    out = run(
        """
        import pytree_lab
        from pytree_lab import PytreeDiagram, describe, diagnose
        tree = {"weight": [1.0, -1.0], "bias": 0.0, "name": "mlp"}
        s = describe(tree)
        print([leaf.path for leaf in s.leaves])
        print(s.counts_line())
        d = PytreeDiagram(tree)
        d.selected_path = "['bias']"
        print(d.selected_path, len(d.rows))
        print(diagnose(tree, {"weight": [1.0, -1.0], "name": "mlp"}).path)
        assert "jax" not in sys.modules and "numpy" not in sys.modules
        """
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == str(["['bias']", "['name']", "['weight'][0]", "['weight'][1]"])
    assert lines[1] == "4 leaves, 3 numerical parameter values; not differentiable: ['name'] (str)"
    assert lines[2] == "['bias'] 5"
    assert lines[3] == "['bias']"


def test_explorer_without_jax_says_what_to_install():
    out = run(
        """
        import pytree_lab
        try:
            pytree_lab.get_engine()
        except ImportError as err:
            print("ImportError:", err)
        """
    )
    assert "pip install pytree-lab[jax]" in out.stdout or "Lite engine" in out.stdout, out.stdout + out.stderr
