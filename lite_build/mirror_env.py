"""A CPython environment that mirrors the JupyterLite kernel of a built site, for tests.

    python lite_build/mirror_env.py SITE [ENV_DIR]

The browser kernel runs Pyodide's Python 3.14 with exactly the site's wheels, numpy and
pandas at the versions of the site's Pyodide lock, and no JAX. Pyodide cannot run under
pytest, so the explorer and the notebooks are tested in a CPython environment with the same
packages:

- the site's own wheels, installed `--no-deps` from the built site's `pypi/` and
  `static/pyodide/` folders (the very files the browser installs; no other versions);
- numpy and pandas at the versions in the site's `static/pyodide/pyodide-lock.json`,
  `--no-deps` (their dependencies are among the site's wheels);
- ipykernel (the browser has its own kernel; a CPython kernel needs the real one);
- no jax; the kernel starts with `pytree_lab_lite.install_as_jax()`, as the setup cell does in
  the browser once numpy has arrived, so `import jax` and `import optax` give the Lite engine.

The interpreter is pyenv's CPython 3.13.0 (the newest here that the pinned IPython accepts;
`LITE_MIRROR_PYTHON` overrides it). If it is missing, this fails with a sentence saying so.
A kernelspec named `python3` is written into ENV_DIR/jupyter/kernels: put ENV_DIR/jupyter
first in JUPYTER_PATH and every Jupyter tool starts this environment's kernel.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ENV = ROOT / ".venv-lite"
DEFAULT_PYTHON = Path.home() / ".pyenv" / "versions" / "3.13.0" / "bin" / "python3.13"
KERNEL_NAME = "python3"
KERNEL_DISPLAY = "Python 3 (Lite mirror)"
STARTUP = "import pytree_lab_lite as _c; _c.install_as_jax(); del _c"
STAMP = ".pytree-lab-mirror.json"


class MirrorError(RuntimeError):
    """The mirror environment cannot be made; the message says why."""


def interpreter() -> Path:
    """LITE_MIRROR_PYTHON, else pyenv's CPython 3.13.0, else python3.13 or python3.12 on PATH."""
    named = os.environ.get("LITE_MIRROR_PYTHON")
    on_path = [Path(p) for v in ("3.13", "3.12") if (p := shutil.which(f"python{v}"))]
    found = [Path(named)] if named else [DEFAULT_PYTHON, *on_path]
    for python in found:
        if python.is_file() and os.access(python, os.X_OK):
            return python
    raise MirrorError(
        f"the Lite-mirror environment needs CPython 3.12 or 3.13 ({found[0]}; pyenv install 3.13.0, "
        "or set LITE_MIRROR_PYTHON to a CPython 3.12+ interpreter); none is there"
    )


def site_wheels(site: Path) -> list[Path]:
    wheels = sorted((site / "pypi").glob("*.whl")) + sorted((site / "static" / "pyodide").glob("*.whl"))
    # numpy/pandas in static/pyodide (a site built --include-compiled) are wasm wheels: never here
    wheels = [w for w in wheels if "emscripten" not in w.name and "wasm32" not in w.name]
    if not wheels:
        raise MirrorError(f"{site} holds no wheels: build the site first (make lite-build)")
    return wheels


def lock_versions(site: Path) -> dict[str, str]:
    lock = json.loads((site / "static" / "pyodide" / "pyodide-lock.json").read_text())
    return {name: lock["packages"][name]["version"] for name in ("numpy", "pandas")}


def wheel_versions(wheels: list[Path]) -> dict[str, str]:
    out = {}
    for whl in wheels:
        name, version = whl.name.split("-")[:2]
        out[name.replace("_", "-").lower()] = version
    return out


def run(cmd: list, **kwargs) -> str:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)
    if proc.returncode != 0:
        raise MirrorError(f"{' '.join(map(str, cmd[:6]))} ... failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return proc.stdout


def make(site: Path, env_dir: Path = DEFAULT_ENV) -> Path:
    """Make (or reuse, when made from the same wheels) the mirror environment; its python."""
    site = Path(site).resolve()
    env_dir = Path(env_dir).resolve()
    python = interpreter()
    wheels = site_wheels(site)
    pins = lock_versions(site)
    # the project's own wheels change with every edit: they are reinstalled alone, the rest kept
    project = [w for w in wheels if w.name.split("-")[0] in ("pytree_lab", "pytree_lab_lite", "pytree_lab_site")]
    want = {
        "python": str(python),
        "wheels": {w.name: hashlib.sha256(w.read_bytes()).hexdigest() for w in wheels if w not in project},
        "numpy_pandas": pins,
    }
    env_python = env_dir / "bin" / "python"
    stamp = env_dir / STAMP
    if stamp.is_file() and env_python.exists():
        try:
            made = json.loads(stamp.read_text())
        except ValueError:
            made = {}
        if {k: made.get(k) for k in want} == want:
            installed = {w.name: hashlib.sha256(w.read_bytes()).hexdigest() for w in project}
            if made.get("project") != installed:
                pip = [env_python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
                run([*pip, "--no-deps", "--force-reinstall", *project])
                stamp.write_text(json.dumps({**made, "project": installed}, indent=1))
            write_kernelspec(env_dir)
            return env_python
    if env_dir.exists():
        if not stamp.is_file():
            raise MirrorError(f"{env_dir} exists and was not made by mirror_env.py; move it away")
        shutil.rmtree(env_dir)
    run([python, "-m", "venv", env_dir])
    pip = [env_python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    # the site's wheels and the lock's numpy/pandas, exactly, without dependency resolution
    run([*pip, "--no-deps", *wheels, f"numpy=={pins['numpy']}", f"pandas=={pins['pandas']}"])
    # ipykernel and what it needs; pip keeps the site's versions that already satisfy it
    run([*pip, "ipykernel"])
    check(env_python, wheels, pins)
    write_kernelspec(env_dir)
    project_hashes = {w.name: hashlib.sha256(w.read_bytes()).hexdigest() for w in project}
    stamp.write_text(json.dumps({**want, "project": project_hashes}, indent=1))
    return env_python


def check(env_python: Path, wheels: list[Path], pins: dict[str, str]) -> None:
    """The environment holds the site's versions (ipykernel did not move one) and no jax."""
    code = (
        "import importlib.metadata as m, importlib.util as u, json, sys\n"
        "names = json.loads(sys.argv[1])\n"
        "print(json.dumps({'versions': {n: m.version(n) for n in names}, 'jax': u.find_spec('jax') is not None}))"
    )
    want = {**wheel_versions(wheels), **pins}
    got = json.loads(run([env_python, "-c", code, json.dumps(sorted(want))]))
    moved = {n: (v, got["versions"][n]) for n, v in want.items() if got["versions"][n] != v}
    if moved:
        raise MirrorError(f"the mirror environment does not hold the site's versions: {moved}")
    if got["jax"]:
        raise MirrorError("jax is importable in the mirror environment; the Lite kernel has none")


def jupyter_path(env_dir: Path = DEFAULT_ENV) -> Path:
    """Put this first in JUPYTER_PATH: its kernels/python3 is the mirror's kernel."""
    return Path(env_dir).resolve() / "jupyter"


def write_kernelspec(env_dir: Path) -> Path:
    spec_dir = jupyter_path(env_dir) / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [
            str(Path(env_dir).resolve() / "bin" / "python"),
            "-m",
            "ipykernel_launcher",
            "-f",
            "{connection_file}",
            f"--IPKernelApp.exec_lines={json.dumps([STARTUP])}",
        ],
        "display_name": KERNEL_DISPLAY,
        "language": "python",
        "metadata": {"debugger": False},
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1))
    return spec_dir


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print(__doc__.split("\n\n")[1].strip())
        return 2
    try:
        python = make(Path(args[0]), Path(args[1]) if len(args) > 1 else DEFAULT_ENV)
    except MirrorError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"mirror environment: {python}\nJUPYTER_PATH={jupyter_path(python.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
