"""The README's install line runs the course: a fresh venv holding only `pip install "pytree-lab[jax]"`
(this checkout's wheel, its dependencies from the package index through pip's cache) runs the three
course notebooks top to bottom with nbclient, answered as a student would, with the lessons' numbers.

The venv also gets `ipykernel`: it is the kernel a Jupyter front end starts, not a course
dependency (a student's JupyterLab, Notebook or VS Code brings its own). Nothing else is installed
there: no pytest, no jupyterlab, no dev extra. In the pytest run by `make test` (slow: a venv and an
install; a second run reuses pip's cache).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from kernel_harness import notebook_client
from test_notebooks import (
    CELL_TIMEOUT,
    CONTENT,
    INSTRUCTOR,
    LESSON,
    PACKED,
    assert_checks_passed,
    cell_text,
    evidence,
    fill_in_answers,
)

pytestmark = pytest.mark.install

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _run(*cmd, **kw) -> subprocess.CompletedProcess:
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=1200, **kw)
    assert out.returncode == 0, f"{cmd} failed ({out.returncode}):\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}"
    return out


def _clean_env() -> dict:
    """This process's environment without anything that would lend the dev venv's packages."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


def test_readme_names_the_install_that_runs_the_course():
    assert (
        'pip install "pytree-lab[jax]"   # a live kernel: JAX and optax, everything the course notebooks use' in README
    )


@pytest.fixture(scope="module")
def student_venv(tmp_path_factory) -> Path:
    wheels = tmp_path_factory.mktemp("wheel")
    _run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", wheels, ROOT, env=_clean_env())
    (wheel,) = wheels.glob("pytree_lab-*.whl")
    venv = tmp_path_factory.mktemp("student") / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    _run(base, "-m", "venv", venv, env=_clean_env())
    py = venv / "bin" / "python"
    # exactly the README's line, with the checkout's wheel in place of the name on PyPI
    # (--no-compile: the .pyc files of what the notebooks import are written as they import it;
    # compiling every module of jax and scipy up front was a third of this venv's CPU time)
    _run(py, "-m", "pip", "install", "--quiet", "--no-compile", f"pytree-lab[jax] @ {wheel.as_uri()}", env=_clean_env())
    _run(py, "-m", "pip", "install", "--quiet", "--no-compile", "ipykernel", env=_clean_env())
    _run(py, "-m", "pip", "check", env=_clean_env())
    return venv


def _installed(venv: Path) -> dict[str, str]:
    listed = _run(venv / "bin" / "python", "-m", "pip", "list", "--format=freeze", env=_clean_env()).stdout
    return {n.lower(): v for n, v in (line.split("==", 1) for line in listed.split() if "==" in line)}


def test_the_venv_holds_the_documented_install_and_nothing_of_dev(student_venv):
    installed = _installed(student_venv)
    for name in ("pytree-lab", "jax", "jaxlib", "optax", "anywidget", "ipywidgets", "bqplot", "numpy", "ipykernel"):
        assert name in installed, name
    for dev_only in ("pytest", "jupyterlab", "playwright", "equinox", "autograd", "hypothesis", "nbclient"):
        assert dev_only not in installed, dev_only


def _execute(name: str, venv: Path, workdir: Path, monkeypatch, *, answered: bool = True):
    nb = nbformat.read(CONTENT / name, as_version=4)
    if answered:
        fill_in_answers(nb, name)
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "import sys, pytree_lab\nprint('PREFIX', sys.prefix)\nprint('FROM', pytree_lab.__file__)", id="where"
        )
    )
    workdir.mkdir(parents=True, exist_ok=True)
    env = _clean_env()
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    env["JAX_PLATFORMS"] = "cpu"
    env.pop("JUPYTER_PLATFORM_DIRS", None)
    # a kernelspec for the student venv's python (the native "python3" spec would run this one's),
    # found through JUPYTER_PATH, so nbclient makes, owns and shuts down the kernel manager itself
    share = workdir.parent / f"{workdir.name}-share"
    spec = share / "kernels" / "student"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [str(venv / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "student venv",
                "language": "python",
            }
        )
    )
    monkeypatch.setenv("JUPYTER_PATH", str(share))
    client = notebook_client(nb, workdir, timeout=CELL_TIMEOUT, kernel_name="student")
    client.execute(env=env)
    where = cell_text(nb, "where")
    assert f"PREFIX {venv}\n" in where, where  # the student venv's kernel ran it
    assert f"FROM {venv}/lib/" in where, where  # with the installed wheel, not this checkout
    return nb


def test_lesson_runs_with_optax_from_the_jax_extra(student_venv, tmp_path, monkeypatch):
    nb = _execute(LESSON, student_venv, tmp_path, monkeypatch)
    assert "optimizer state (optax.adam)" in cell_text(nb, "optimizer-state")
    assert re.search(r"Before/after: 4\.0 0\.6399999\d*\n", cell_text(nb, "update"))
    assert "grads['weight']: [-8. -4.]" in cell_text(nb, "value-and-grad")
    assert "grads['bias']: -4.0" in cell_text(nb, "value-and-grad")
    assert "is 96." in cell_text(nb, "check-squared-norm")
    assert_checks_passed(
        evidence(tmp_path, "pytree-lesson-evidence"), {"squared_norm", "nested_scale_grad", "repair_update"}
    )


def test_packed_parameters_notebook_runs(student_venv, tmp_path, monkeypatch):
    nb = _execute(PACKED, student_venv, tmp_path, monkeypatch)
    for expected in ("prediction: [-0.5]", "loss: 0.25", "grads['w']: [-1.0, 1.0]", "grads['b']: [-1.0]"):
        assert expected in cell_text(nb, "dict-example")
    assert "worked example: [8.0, 12.0, 4.0]" in cell_text(nb, "worked-example")
    assert "Check 1: passed, score 1.00 (5 of 5 cases right)" in cell_text(nb, "check-flat")
    assert_checks_passed(evidence(tmp_path, "packed-parameters-evidence"), {"grad_over_flat_params"})


def test_instructor_demo_steps_adam_twenty_times(student_venv, tmp_path, monkeypatch):
    nb = _execute(INSTRUCTOR, student_venv, tmp_path, monkeypatch, answered=False)
    adam = cell_text(nb, "optax-panel")
    assert "columns: ['params', 'grads', 'adam mu', 'adam nu', 'updated']" in adam
    assert "(21 points)" in adam  # the initial point and 20 real Adam steps
    assert "d loss / d scale: -4.0" in cell_text(nb, "dataclass")
