"""The package as a release ships it: sdist and wheel built from this checkout with `python -m build`
(the wheel is built from the sdist, so the sdist is proven complete), then their metadata read back.
"""

from __future__ import annotations

import email
import email.policy
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
VERSION = re.search(r'^__version__ = "([^"]+)"', (REPO / "widgets/pytree_lab/__init__.py").read_text(), re.M).group(1)


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    run = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(REPO)], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def wheel(dist) -> zipfile.ZipFile:
    (whl,) = dist.glob("pytree_lab-*.whl")
    return zipfile.ZipFile(whl)


@pytest.fixture(scope="module")
def metadata(wheel) -> email.message.Message:
    return email.message_from_bytes(
        wheel.read(f"pytree_lab-{VERSION}.dist-info/METADATA"), policy=email.policy.compat32
    )


def test_artifacts_are_named_by_the_one_version(dist):
    assert sorted(p.name for p in dist.iterdir()) == [
        f"pytree_lab-{VERSION}-py3-none-any.whl",
        f"pytree_lab-{VERSION}.tar.gz",
    ]
    # pyproject.toml reads the version from __init__.py instead of writing it a second time
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject
    assert not re.search(r"^version\s*=", pyproject, re.M)


def test_wheel_carries_the_mit_license(wheel, metadata):
    assert metadata["Version"] == VERSION
    assert metadata["License-Expression"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]
    shipped = wheel.read(f"pytree_lab-{VERSION}.dist-info/licenses/LICENSE").decode()
    assert shipped == (REPO / "LICENSE").read_text()
    assert shipped.startswith("MIT License\n") and "WITHOUT WARRANTY OF ANY KIND" in shipped


def test_wheel_is_typed_and_classified(wheel, metadata):
    assert wheel.read("pytree_lab/py.typed") == b""
    classifiers = metadata.get_all("Classifier")
    for c in (
        "Typing :: Typed",
        "Framework :: Jupyter",
        "Framework :: Jupyter :: JupyterLab :: 4",
        "Intended Audience :: Education",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.13",
    ):
        assert c in classifiers
    urls = dict(u.split(", ", 1) for u in metadata.get_all("Project-URL"))
    assert set(urls) == {"Homepage", "Documentation", "Source", "Issues", "Changelog"}
    assert all(u.startswith("https://") for u in urls.values())
    assert metadata["Requires-Python"] == ">=3.11"


def test_requirements_have_floors_and_no_caps(metadata):
    reqs = [Requirement(r) for r in metadata.get_all("Requires-Dist")]
    runtime = {r.name: str(r.specifier) for r in reqs if r.marker is None}
    assert runtime == {"anywidget": ">=0.11", "ipywidgets": ">=8.1", "bqplot": ">=0.13", "numpy": ">=1.24.1"}
    jax_extra = {
        r.name: str(r.specifier)
        for r in reqs
        if r.marker and r.marker.evaluate({"extra": "jax"}) and not r.marker.evaluate({"extra": "dev"})
    }
    # the documented install runs the course: the lessons use optax's Adam
    assert jax_extra == {"jax": ">=0.4.30", "optax": ">=0.2.3"}
    assert not [
        str(r)
        for r in reqs
        if any(s.operator in ("<", "<=") for s in r.specifier)
        and r.name in ("anywidget", "ipywidgets", "bqplot", "numpy", "jax", "optax")
    ]


def test_the_wheel_ships_neither_the_lite_engine_nor_the_site_glue(wheel, metadata, dist):
    """The Lite engine is its own distribution (packages/pytree-lab-lite) and the JupyterLite
    kernel's glue the site's (lite_build/kernel): `pip install "pytree-lab[jax]"` brings neither,
    and nothing in the library imports them (it finds the engine by name only where JAX is missing)."""
    names = wheel.namelist()
    assert not [n for n in names if n.startswith(("pytree_lab/compat/", "pytree_lab_lite/", "pytree_lab_site/"))]
    assert not [n for n in names if re.search(r"lite_kernel|lite_updates|_without_numpy", n)]
    reqs = [Requirement(r) for r in metadata.get_all("Requires-Dist")]
    assert not [
        r
        for r in reqs
        if r.name in ("pytree-lab-lite", "pytree-lab-site", "autograd")
        and not (r.marker and r.marker.evaluate({"extra": "dev"}) and not r.marker.evaluate({"extra": "jax"}))
    ]
    sdist = next(dist.glob("*.tar.gz"))
    with tarfile.open(sdist) as tar:
        assert not [n for n in tar.getnames() if "/compat/" in n or "pytree_lab_lite" in n or "pytree_lab_site" in n]
    for path in (REPO / "widgets" / "pytree_lab").rglob("*.py"):
        source = path.read_text(encoding="utf-8")
        imports = re.findall(r"^\s*(?:from|import)\s+(pytree_lab_\w+|\.+compat)\b", source, re.M)
        assert not imports, f"{path.relative_to(REPO)} imports {imports}"


def test_sdist_has_license_changelog_and_metadata(dist):
    (sdist,) = dist.glob("*.tar.gz")
    root = f"pytree_lab-{VERSION}"
    with tarfile.open(sdist) as tar:
        names = set(tar.getnames())
        for name in (
            "LICENSE",
            "CHANGELOG.md",
            "README.md",
            "pyproject.toml",
            "widgets/pytree_lab/py.typed",
            "widgets/pytree_lab/__init__.py",
            "PKG-INFO",
        ):
            assert f"{root}/{name}" in names
        pkg_info = email.message_from_bytes(tar.extractfile(f"{root}/PKG-INFO").read(), policy=email.policy.compat32)
    assert pkg_info["License-File"] == "LICENSE" and pkg_info["Version"] == VERSION


def test_readme_images_render_on_pypi(metadata):
    """PyPI shows the README from the metadata, away from the repository: images need absolute URLs."""
    description = metadata.get_payload()
    images = re.findall(r"!\[[^\]]*\]\(([^)\s]+)", description) + re.findall(r'<img[^>]+src="([^"]+)"', description)
    assert images, "the README shows the explorer"
    assert [u for u in images if not u.startswith("https://")] == []
    # and the image is the one in this checkout
    assert "https://raw.githubusercontent.com/pytree-lab/pytree-lab/main/docs/explorer.png" in images
    assert (REPO / "docs/explorer.png").is_file()
    assert metadata["Description-Content-Type"] == "text/markdown"


def test_changelog_names_the_current_version_or_unreleased():
    text = (REPO / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog\n")
    assert re.search(rf"^## \[{re.escape(VERSION)}\]", text, re.M)


def test_wheel_ships_the_course_notebooks_and_the_nbgrader_command_takes_the_instructors_solutions(wheel, tmp_path):
    # `pytree-lab nbgrader` from the wheel alone: unpacked away from any checkout, run elsewhere;
    # the package holds no reference solution, so they come from the instructor's folder
    notebooks = sorted(n for n in wheel.namelist() if n.endswith(".ipynb"))
    assert notebooks == [
        "pytree_lab/course/notebooks/01_pytrees.ipynb",
        "pytree_lab/course/notebooks/02_packed_parameters.ipynb",
    ]
    for name in notebooks:
        assert wheel.read(name) == (REPO / "content" / Path(name).name).read_bytes()
    assert not [n for n in wheel.namelist() if "solutions" in n or "course_source" in n]
    wheel.extractall(tmp_path / "site")
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTREE_LAB_SOLUTIONS"}

    def pytree_lab(*args: str, **extra: str) -> subprocess.CompletedProcess:
        code = "import sys; sys.path.insert(0, sys.argv[1]); from pytree_lab.course.cli import main; "
        code += "sys.exit(main(sys.argv[2:]))"
        return subprocess.run(
            [sys.executable, "-I", "-c", code, str(tmp_path / "site"), "nbgrader", *args],
            cwd=work,
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=300,
        )

    # none given: one sentence that says where to name them, no traceback, nothing written
    run = pytree_lab("course")
    assert run.returncode == 2 and run.stdout == "", run.stderr[-3000:]
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    assert run.stderr.startswith("pytree-lab nbgrader: no reference solution (squared_norm.py, ")
    assert "--solutions DIR or PYTREE_LAB_SOLUTIONS." in run.stderr
    assert list(work.iterdir()) == []
    # a folder that lacks them says the same of that folder
    run = pytree_lab("course", "--solutions", str(tmp_path))
    assert run.returncode == 2 and f"in {tmp_path}: " in run.stderr and list(work.iterdir()) == []
    # PYTREE_LAB_SOLUTIONS, then --solutions: each writes the course with the given solutions
    solutions = REPO / "course_source" / "solutions"
    run = pytree_lab("by-env", PYTREE_LAB_SOLUTIONS=str(solutions))
    assert run.returncode == 0, run.stderr[-3000:]
    run = pytree_lab("course", "--solutions", str(solutions))
    assert run.returncode == 0, run.stderr[-3000:]
    source = (work / "course" / "source" / "pytrees" / "01_pytrees.ipynb").read_text()
    assert json.dumps((solutions / "squared_norm.py").read_text().rstrip("\n"))[1:-1] in source
    assert (work / "by-env" / "source" / "pytrees" / "01_pytrees.ipynb").is_file()
    shutil.rmtree(work / "by-env")
    written = sorted(str(p.relative_to(work)) for p in work.rglob("*") if p.is_file())
    assert written == [
        "course/nbgrader_config.py",
        "course/source/pytrees/01_pytrees.ipynb",
        "course/source/pytrees/02_packed_parameters.ipynb",
    ]
