"""The Binder / repo2docker environment (binder/), from its files alone.

repo2docker itself needs Docker, which these machines do not have; this test does what it does
for a `requirements.txt` repository: a fresh venv, `pip install -r binder/requirements.txt`, the
repository's files copied into a home (Binder's repository is the student's home), then
`binder/postBuild` run there. Then, inside that venv alone (no PYTHONPATH, none of the dev
extra's tools), the three course notebooks run with nbclient, the answers left as the students
get them, and pytree-lab's server extension and the first-lesson start page are configured. No
file of that home, of `make lab`'s root or of the Lite site's notebooks holds a line of a
reference solution (tests/student_trees.py).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from student_trees import SOLUTION_LINES, SOLUTIONS, leaks

pytestmark = pytest.mark.install

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ("01_pytrees.ipynb", "02_packed_parameters.ipynb", "03_instructor_demo.ipynb")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(venv: Path) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "JUPYTER_PATH", "JUPYTER_CONFIG_DIR", "JUPYTER_PLATFORM_DIRS")
    }
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    env["VIRTUAL_ENV"] = str(venv)
    env["JAX_PLATFORMS"] = "cpu"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def sh(args, *, env, cwd, timeout=1200) -> str:
    proc = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{args}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


RUN_NOTEBOOKS = textwrap.dedent("""
    import json, pathlib, sys
    import nbformat
    from nbclient import NotebookClient
    import pytree_lab

    content, workdir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    report = {"pytree_lab": pytree_lab.__file__, "notebooks": {}}
    for name in sys.argv[3:]:
        nb = nbformat.read(content / name, as_version=4)
        NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=False,
                       resources={"metadata": {"path": str(workdir)}}).execute()
        texts = []
        for cell in nb.cells:
            for out in cell.get("outputs", []):
                texts.append(out.get("text", "") or out.get("data", {}).get("text/plain", ""))
        report["notebooks"][name] = texts
    print(json.dumps(report))
""")


@pytest.fixture(scope="module")
def binder_venv(tmp_path_factory):
    venv = tmp_path_factory.mktemp("binder") / "venv"
    base = os.environ.get("PTL_BASE_PYTHON") or getattr(sys, "_base_executable", None) or "python3"
    subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=300)
    env = clean_env(venv)
    sh(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-compile",
            "-r",
            str(ROOT / "binder" / "requirements.txt"),
        ],
        env=env,
        cwd=ROOT,
    )
    # repo2docker copies the repository (its files as a clone has them) into the home, then runs
    # postBuild there
    home = venv.parent / "home"
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (home / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, home / name)
    assert (home / "course_source" / "solutions").is_dir()  # the repository has them; postBuild deletes them
    sh(["bash", str(home / "binder" / "postBuild")], env=env, cwd=home)
    return venv


@pytest.fixture(scope="module")
def binder_home(binder_venv) -> Path:
    return binder_venv.parent / "home"


def test_binder_environment_runs_the_three_notebooks(binder_venv, binder_home, tmp_path):
    env = clean_env(binder_venv)
    content = binder_home / "content"
    out = sh(
        [str(binder_venv / "bin" / "python"), "-c", RUN_NOTEBOOKS, str(content), str(tmp_path), *NOTEBOOKS],
        env=env,
        cwd=tmp_path,
    )
    report = json.loads(out.strip().splitlines()[-1])
    # pytree-lab came from the venv (installed by postBuild), not from this checkout's widgets/
    assert report["pytree_lab"].startswith(str(binder_venv))
    lesson = "".join(report["notebooks"]["01_pytrees.ipynb"])
    assert "computing with JAX" in lesson
    assert "Not answered yet" in lesson  # the exercises as the students get them
    packed = "".join(report["notebooks"]["02_packed_parameters.ipynb"])
    assert "computing with JAX" in packed
    demo = "".join(report["notebooks"]["03_instructor_demo.ipynb"])
    assert demo  # ran to the end without an error (allow_errors=False)
    # only what the notebooks need: none of the dev extra's tools
    listed = sh([str(binder_venv / "bin" / "python"), "-m", "pip", "list", "--format=json"], env=env, cwd=tmp_path)
    names = {p["name"].lower() for p in json.loads(listed)}
    assert {"jax", "optax", "jupyterlab", "pytree-lab", "anywidget", "bqplot"} <= names
    assert not names & {"pytest", "playwright", "nbgrader", "jupyterhub", "equinox", "hypothesis", "jupytext"}


def test_the_binder_home_holds_no_reference_solution(binder_home):
    # the student's home after postBuild: the lessons, none of the instructor's side (the
    # reference solutions, and the tests, which hold right answers of their own)
    assert (binder_home / "content" / "01_pytrees.ipynb").is_file() and (binder_home / "binder").is_dir()
    assert not (binder_home / "course_source").exists() and not (binder_home / "tests").exists()
    assert leaks(binder_home) == []


def test_the_solution_lines_searched_for_are_each_solutions_own(tmp_path):
    files = {p.stem: p.read_text(encoding="utf-8") for p in SOLUTIONS.glob("*.py")}
    assert sorted(files) == sorted(SOLUTION_LINES)  # every reference solution is searched for
    for exercise, lines in SOLUTION_LINES.items():
        assert lines and all(line in [s.strip() for s in files[exercise].splitlines()] for line in lines), exercise
    # the search finds a solution pasted into a notebook (JSON), a text file, and the folder itself
    nb = {"cells": [{"cell_type": "code", "source": files["nested_scale_grad"]}]}
    (tmp_path / "a.ipynb").write_text(json.dumps(nb))
    (tmp_path / "notes.md").write_text(files["squared_norm"])
    shutil.copytree(SOLUTIONS, tmp_path / "course_source" / "solutions")
    found = leaks(tmp_path)
    assert any(f.startswith("a.ipynb: nested_scale_grad: pred = ") for f in found), found
    assert any(f.startswith("notes.md: squared_norm: norm_squared = ") for f in found), found
    assert "course_source: a solution file" in found


def test_make_lab_and_the_lite_site_hold_no_reference_solution(tmp_path):
    # `make lab` roots JupyterLab at content/; the Lite site's notebooks are content/*.ipynb
    make = (ROOT / "Makefile").read_text()
    assert "--ServerApp.root_dir=content " in make and make.count("root_dir") == 1
    assert leaks(ROOT / "content") == []
    sys.path.insert(0, str(ROOT))
    try:
        from lite_build.build import collect_notebooks
    finally:
        sys.path.remove(str(ROOT))
    for source, name in collect_notebooks([]):
        assert source.parent == ROOT / "content" and name.endswith(".ipynb")
        shutil.copy2(source, tmp_path / name)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(NOTEBOOKS)
    assert leaks(tmp_path) == []


def test_binder_server_extension_and_first_lesson(binder_venv, tmp_path):
    env = clean_env(binder_venv)
    listing = subprocess.run(
        [str(binder_venv / "bin" / "jupyter"), "server", "extension", "list"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    text = listing.stdout + listing.stderr
    assert "pytree_lab" in text and "enabled" in text.split("pytree_lab")[1][:40]
    config = binder_venv / "etc" / "jupyter" / "jupyter_server_config.json"
    assert json.loads(config.read_text())["ServerApp"]["default_url"] == "/lab/tree/content/01_pytrees.ipynb"


def test_binder_server_opens_the_first_lesson_hides_src_and_shows_students_no_instructor_tools(tmp_path):
    # postBuild's config step, run as postBuild runs it (into a prefix's etc/jupyter), then a real
    # JupyterLab reading that folder: the bare URL lands on the first lesson, src/ is not listed
    script = (ROOT / "binder" / "postBuild").read_text()
    step = script[script.index("<<'PY'\n") + len("<<'PY'\n") : script.index("\nPY\n")]
    config = tmp_path / "etc" / "jupyter"
    config.mkdir(parents=True)
    sh([sys.executable, "-c", step, str(config / "jupyter_server_config.json")], env=dict(os.environ), cwd=tmp_path)
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    sh(["bash", str(ROOT / "binder" / "student-only"), str(config)], env={**os.environ, "PATH": path}, cwd=tmp_path)
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "content", root / "content")
    assert (root / "content" / "src").is_dir()
    port = free_port()
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(config), "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    env["JUPYTER_PREFER_ENV_PATH"] = "0"  # this folder before the venv's own, as `make lab` has it
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}"]
    cmd += ["--IdentityProvider.token=t0ken", f"--ServerApp.root_dir={root}"]
    server = subprocess.Popen(cmd, env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        opener = urllib.request.build_opener(NoRedirect)
        deadline = time.monotonic() + 180
        while True:
            try:
                opener.open(f"http://127.0.0.1:{port}/?token=t0ken", timeout=10)
            except urllib.error.HTTPError as exc:
                if exc.code == 302:
                    landing = exc.headers["Location"]
                    break
                raise
            except OSError:
                assert time.monotonic() < deadline, "the server did not answer"
                time.sleep(2)
        assert landing.split("?")[0].endswith("/lab/tree/content/01_pytrees.ipynb")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents/content?token=t0ken", timeout=30) as r:
            listed = {c["name"] for c in json.load(r)["content"]}
        assert "01_pytrees.ipynb" in listed and "src" not in listed

        # binder/student-only (the hub image and `make lab` run it): none of nbgrader's instructor
        # tools, the students' Assignments panel kept (this environment has nbgrader, Binder's none)
        def get(path: str) -> tuple[int, str]:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60) as r:
                    return r.status, r.read().decode()
            except urllib.error.HTTPError as exc:
                return exc.code, ""

        assert get("/formgrader/api/status?token=t0ken")[0] == 404  # the formgrader's server side
        assert get("/formgraders?token=t0ken")[0] == 404  # the course list's
        assert get("/nbgrader_version?version=0&token=t0ken")[0] == 200  # the Assignments panel's
        page = get("/lab?token=t0ken")[1]
        data = json.loads(page.split('id="jupyter-config-data"', 1)[1].split(">", 1)[1].split("</script>", 1)[0])
        off = set(data["disabledExtensions"])
        assert {f"@jupyter/nbgrader:{p}" for p in ("create-assignment", "formgrader", "course-list")} <= off
        assert not {"@jupyter/nbgrader:assignment-list", "@jupyter/nbgrader:validate-assignment"} & off
    finally:
        server.terminate()
        server.wait(timeout=60)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def test_binder_requirements_cover_the_package_and_its_jax_extra():
    """What postBuild's `pip install --no-deps .` leaves out must be in requirements.txt."""
    import re
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    needed = project["dependencies"] + project["optional-dependencies"]["jax"]

    def name(req: str) -> str:
        return re.split(r"[<>=!~\[; ]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")

    listed = {
        name(line)
        for line in (ROOT / "binder" / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {name(r) for r in needed} <= listed
    assert "bash" in (ROOT / "binder" / "postBuild").read_text().splitlines()[0]
    assert os.access(ROOT / "binder" / "postBuild", os.X_OK)
