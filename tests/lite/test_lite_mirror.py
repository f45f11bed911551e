"""The course and the StepExplorer on the Lite kernel's own packages (lite_build/mirror_env.py).

A CPython 3.13 environment holds exactly the built site's wheels, numpy and pandas at the
site's Pyodide-lock versions, ipykernel and no jax; its kernel starts with install_as_jax(),
as the browser's setup cell does, so `import jax` is the Lite engine. In it:
- the site's three course notebooks run to the end with nbclient, without an error;
- the StepExplorer opens in a real JupyterLab page in Chromium (that environment's kernel
  chosen through JUPYTER_PATH): sliders, bars, worked calculation and the lesson's numbers
  on screen, and one key press on a slider recomputed by the kernel.

Marked `browser`: it needs the built site, which the browser suite builds once per session.
"""

from __future__ import annotations

import contextlib
import os
import re

import nbformat
import pytest

from lite_build import first_paint, mirror_env
from lite_build.build import MIRROR_ENV

pytestmark = pytest.mark.browser

COURSE = ("01_pytrees.ipynb", "02_packed_parameters.ipynb", "03_instructor_demo.ipynb")
PROBE = (
    "import sys, numpy, pandas, pytree_lab\n"
    "print('MIRROR', sys.executable, numpy.__version__, pandas.__version__, sys.modules['jax'].__version__, "
    "pytree_lab.get_engine().is_lite)"
)


@contextlib.contextmanager
def env_var(name: str, value: str):
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


@pytest.fixture(scope="session")
def mirror(lite_site):
    env_dir = MIRROR_ENV  # the one the site's build ran its notebooks in (made from the same wheels)
    try:
        with first_paint.locked(env_dir):  # a site build on another worker may be making it
            python = mirror_env.make(lite_site, env_dir)
    except mirror_env.MirrorError as err:
        pytest.fail(str(err), pytrace=False)
    return {
        "python": python,
        "env_dir": env_dir,
        "jupyter_path": str(mirror_env.jupyter_path(env_dir)),
        "pins": mirror_env.lock_versions(lite_site),
    }


@pytest.mark.parametrize("name", COURSE)
def test_course_notebook_runs_in_the_mirror(name, lite_site, mirror, tmp_path):
    from nbclient import NotebookClient

    nb = nbformat.read(lite_site / "files" / name, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))
    nb.metadata["kernelspec"] = {
        "name": mirror_env.KERNEL_NAME,
        "display_name": mirror_env.KERNEL_DISPLAY,
        "language": "python",
    }
    with env_var("JUPYTER_PATH", mirror["jupyter_path"]):
        client = NotebookClient(
            nb, kernel_name=mirror_env.KERNEL_NAME, timeout=600, resources={"metadata": {"path": str(tmp_path)}}
        )
        client.execute()  # raises CellExecutionError, with the traceback, on any failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    probe = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    _, executable, numpy_v, pandas_v, jax_v, is_lite = probe.split()
    assert executable.startswith(str(mirror["env_dir"]))
    assert (numpy_v, pandas_v) == (mirror["pins"]["numpy"], mirror["pins"]["pandas"])
    assert jax_v.endswith("+pytree-lab-lite") and is_lite == "True"
    shown = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "computing with pytree-lab Lite engine" in shown


EXPLORER_CELLS = [
    "import sys\nfrom pytree_lab import StepExplorer, get_engine\nex = StepExplorer()\nex",
]


@pytest.fixture(scope="module")
def mirror_lab(mirror, pw, tmp_path_factory):
    from browser.harness import launch_chromium, open_lab, start_lab

    with env_var("JUPYTER_PATH", mirror["jupyter_path"]):
        server = start_lab(tmp_path_factory.mktemp("mirror-lab"))
    browser = launch_chromium(pw)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        open_lab(page, server)
        yield page, server
    finally:
        browser.close()
        server.stop()


def test_explorer_on_the_mirror_kernel_in_jupyterlab(mirror, mirror_lab):
    from browser.harness import open_notebook
    from browser.pages import read_bars

    page, server = mirror_lab
    nb = open_notebook(page, server, "mirror_explorer.ipynb", EXPLORER_CELLS, wait_for='[role="tree"]')
    try:
        # the kernel is the mirror's, on the Lite engine
        assert nb.value("sys.executable").startswith(str(mirror["env_dir"]))
        assert nb.value("get_engine().is_lite") is True
        assert nb.value("'jax' in sys.modules and sys.modules['jax'].__version__.endswith('+pytree-lab-lite')") is True

        # the lesson's numbers, in Python and on screen
        result = nb.value("vars(ex.result)")
        assert result["loss"] == pytest.approx(4.0) and result["loss_after"] == pytest.approx(0.64, rel=1e-5)
        assert result["grads"]["weight"] == pytest.approx([-8.0, -4.0]) and result["grads"]["bias"] == pytest.approx(
            -4.0
        )
        assert result["updated"]["weight"] == pytest.approx([1.4, -0.8], rel=1e-6)
        panel = nb.panel
        panel.locator(".bqplot rect.bar").first.wait_for(state="attached")
        drawn = read_bars(panel.locator(".bqplot.figure").first)
        tol = 1.5 / drawn["pixels_per_unit"]
        assert drawn["bars"]["weight[0]"] == pytest.approx([1.0, 1.4], abs=tol)
        assert drawn["bars"]["weight[1]"] == pytest.approx([-1.0, -0.8], abs=tol)
        assert drawn["bars"]["bias"] == pytest.approx([0.0, 0.2], abs=tol)
        text = panel.inner_text()
        for number in ("-8", "-4", "1.4", "-0.8", "0.64"):
            assert re.search(rf"(?<![\d.]){re.escape(number)}(?![\d])", text.replace("\u2212", "-")), number
        calc = panel.locator(".ptl-calc")
        assert calc.count() > 0 and "0.05" in calc.first.inner_text()

        # sliders: one key press on x[0] is recomputed by the mirror's kernel
        sliders = nb.value("sorted(ex.sliders)")
        assert "x[0]" in sliders
        handle = panel.locator('input[type="range"], .noUi-handle[role="slider"]').first
        before = nb.value("ex.sliders['x[0]'].value")
        label = nb.value("list(ex.sliders).index('x[0]')")
        handle = panel.locator('input[type="range"], .noUi-handle[role="slider"]').nth(label)
        handle.focus()
        handle.press("ArrowRight")
        after = nb.kernel.wait_for("ex.sliders['x[0]'].value", lambda v: v != before)
        assert after > before
        got = nb.kernel.wait_for("vars(ex.result)", lambda r: r["loss"] != result["loss"])
        # by hand: prediction = w . x + b with x[0] moved; loss = (prediction - 3) ** 2
        prediction = 1.0 * after - 1.0 * 1.0 + 0.0
        assert got["loss"] == pytest.approx((prediction - 3.0) ** 2, rel=1e-5)
        assert got["grads"]["weight"][0] == pytest.approx(2 * (prediction - 3.0) * after, rel=1e-5)
    finally:
        nb.close()
