"""The floors job: pytree-lab at the oldest versions pyproject.toml allows, on the oldest Python.

    python tools/floors.py [--python python3.11] [--venv .venv-floors] [pytest args...]

Reads the floors from pyproject.toml (every `>=` of the runtime dependencies and of the `jax`
extra, jaxlib pinned to jax's floor), makes a fresh venv with the oldest Python that
`requires-python` allows, installs this checkout (not editable) with exactly those versions,
plus the tools the tests need, and runs the kernel-side tests that cover the engine, the trees,
the training step and the diagram's model, and the three course notebooks via nbclient. No
browser tests: the front ends are tested at today's versions by `make test`.

`make test-floors` runs it, and so does `make test` (tests/test_floors_tool.py, in a venv of
its own under pytest's temporary folder). pip's cache is used, so a second run downloads nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MARK = ".pytree-lab-floors"  # the file that says this job made the venv (so it may replace it)

# Test-only tools for the floors venv (not floors of pytree-lab: the newest that fit).
TEST_TOOLS = [
    "pytest>=8",
    "hypothesis>=6",
    "nbclient>=0.10",
    "nbformat>=5.10",
    "ipykernel>=6.29",
    "jupytext>=1.16",
    "autograd>=1.7",
]

# The kernel-side tests the floors job runs (whole files; their browser tests, if any, are deselected).
# test_trees.py, test_step.py and test_compat_tree_util.py are left out: they register dataclasses
# with the bare `@jax.tree_util.register_dataclass`, which jax 0.4.30 does not accept (it needs
# data_fields and meta_fields); test_tree_floors.py covers the same display with the fields named.
TESTS = [
    "tests/test_tree_floors.py",  # a registered dataclass, as jax 0.4.30 flattens it
    "tests/test_bad_trees.py",
    "tests/test_training.py",
    "tests/test_diagram.py",
    "tests/test_notebooks.py",
]


# What the oldest versions do that is not ours to fix:
FLOOR_OPTIONS = [
    # ipywidgets 8.1.0 reads trait metadata the way traitlets deprecated (fixed in later 8.1.x);
    # pytest makes warnings errors (pyproject.toml), so this one is let through here
    "-W",
    "ignore:Deprecated in traitlets 4.1:DeprecationWarning",
    # the test switches x64 on with `jax.enable_x64`, which jax 0.4.30 does not have
    # (jax.experimental.enable_x64 there); pytree-lab itself reads only jax.config.jax_enable_x64
    "--deselect",
    "tests/test_training.py::test_x64_keeps_every_update_in_float64",
    # the same notebooks again with wrong answers and with none: the JAX they call is the main
    # runs' (run here); `make test` runs these variants at today's versions (they are 2 of the
    # job's 3 minutes)
    "-k",
    "not natural_wrong_answers and not unanswered_notebook",
]


def floors(pyproject: Path = ROOT / "pyproject.toml") -> tuple[str, list[str]]:
    """(oldest Python as "3.X", ["name==floor", ...]) from pyproject.toml."""
    from packaging.requirements import Requirement

    project = tomllib.loads(pyproject.read_text())["project"]
    python = re.fullmatch(r">=\s*(3\.\d+)", project["requires-python"].strip())
    if not python:
        raise SystemExit(f"requires-python must be a plain floor (>=3.X); it is {project['requires-python']!r}")
    pins = []
    for text in project["dependencies"] + project["optional-dependencies"]["jax"]:
        req = Requirement(text)
        lows = [s.version for s in req.specifier if s.operator == ">="]
        if len(lows) != 1:
            raise SystemExit(f"{text!r}: every dependency needs one >= floor for the floors job")
        pins.append(f"{req.name}=={lows[0]}")
        if req.name == "jax":
            pins.append(f"jaxlib=={lows[0]}")  # jax's own floor needs the matching jaxlib
    return python.group(1), pins


def _python_version(python: str) -> str | None:
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except OSError:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def find_python(version: str) -> str | None:
    """python3.X on PATH if it runs (a pyenv shim of a version not selected does not), else pyenv's."""
    candidates = [shutil.which(f"python{version}")]
    pyenv_root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    candidates += sorted(
        (str(p) for p in Path(pyenv_root).glob(f"versions/{version}.*/bin/python{version}")),
        key=lambda p: [int(x) for x in re.findall(r"\d+", p.split("/versions/")[1].split("/")[0])],
        reverse=True,
    )
    for python in filter(None, candidates):
        if _python_version(python) == version:
            return python
    return None


def run(*cmd: str | Path, **kw) -> None:
    print("+", " ".join(map(str, cmd)), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, **kw)


def main(argv: list[str] | None = None) -> int:
    from packaging.version import Version

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--python",
        help="the interpreter to build the venv with (default: python3.X, the oldest requires-python allows)",
    )
    parser.add_argument(
        "--venv",
        default=str(ROOT / ".venv-floors"),
        help="where to make the venv (a venv an earlier run made there is replaced; anything else is refused)",
    )
    args, pytest_args = parser.parse_known_args(argv)
    version, pins = floors()
    python = args.python or find_python(version)
    if not python:
        raise SystemExit(
            f"error: no working python{version} (the oldest Python pyproject.toml allows) on PATH "
            f"or in pyenv; install it (e.g. pyenv install {version}) or pass --python"
        )
    venv = Path(args.venv)
    if venv.exists() or venv.is_symlink():
        # replaced only if this job made it: a folder someone else made (their own venv) is kept
        if not (venv / MARK).is_file() or venv.is_symlink():
            raise SystemExit(
                f"error: {venv} exists and was not made by the floors job (no {MARK} in it); "
                "pass another --venv, or remove it yourself"
            )
        shutil.rmtree(venv)
    run(python, "-m", "venv", venv)
    (venv / MARK).write_text("made by tools/floors.py; replaced on its next run\n")
    py = venv / "bin" / "python"
    got = subprocess.run(
        [py, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if got != version:
        raise SystemExit(f"error: {python} is Python {got}; the floors job needs {version}")
    # the venv's bundled pip may be years old; a current resolver settles the floors at once
    run(py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--upgrade", "pip")
    run(
        py,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",
        f"{ROOT}[jax]",
        ROOT / "packages" / "pytree-lab-lite",  # the Lite engine: test_training and the notebooks' Lite runs
        *pins,
        *TEST_TOOLS,
    )
    run(py, "-m", "pip", "check")
    listed = subprocess.run(
        [py, "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True, check=True
    ).stdout
    installed = dict(line.split("==", 1) for line in listed.split() if "==" in line)
    for pin in pins:
        name, want = pin.split("==")
        if installed.get(name) is None or Version(installed[name]) != Version(want):
            raise SystemExit(f"error: {name} {installed.get(name)} is installed, the floor is {want}")
    print(f"floors on Python {version}: " + ", ".join(pins), flush=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    env["JAX_PLATFORMS"] = "cpu"
    # the venv's installed pytree_lab, not this checkout's widgets/ (rootdir conftest adds none)
    result = subprocess.run(
        [
            py,
            "-m",
            "pytest",
            "-q",
            "-m",
            "not browser",
            "-p",
            "no:cacheprovider",
            *FLOOR_OPTIONS,
            *(pytest_args or TESTS),
        ],
        cwd=ROOT,
        env=env,
    )
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
