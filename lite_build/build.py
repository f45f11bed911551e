"""Build the pytree-lab JupyterLite site from the checkout, from scratch every time.

    python lite_build/build.py [--output-dir DIR] [--contents PATH ...]

What goes in (see README.md):
- the course notebooks content/*.ipynb (plus any --contents), each starting with the
  setup cell of first_cell.py (injected when a notebook lacks it);
- the project's wheels, built from this checkout: pytree-lab, pytree-lab-lite (the Lite
  engine, packages/pytree-lab-lite) and pytree-lab-site (the kernel's glue, lite_build/kernel);
- the pinned pure-Python wheels of kernel-wheels.txt (hash-checked);
- the front ends of jupyterlab-widgets, anywidget, bqplot and bqscales, taken from those
  same wheels, so browser and kernel versions cannot drift apart;
- the Pyodide core from the npm package `pyodide` (integrity-checked), with a lock file
  whose pure-Python entries point at local wheels and whose compiled packages (numpy,
  pandas, ...) point at Pyodide's CDN with absolute, version-pinned URLs.

Nothing is reused from an earlier build: jupyter-lite runs in a fresh staging folder with a
fresh doit database, because an incremental rebuild was seen to drop settings silently.
Downloads are cached (hash-checked) in lite_build/.cache/, which git ignores.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import html
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if __package__:
    from . import first_paint
else:
    import first_paint
CACHE = HERE / ".cache"
DEFAULT_OUTPUT = HERE / "_output"
# Compiled archives, keyed by the sha256 of what was compiled (see ship_bytecode).
BYTECODE_CACHE = CACHE / "bytecode"
# The CPython mirror of the site's kernel that runs the notebooks for their stored outputs.
MIRROR_ENV = CACHE / "mirror"
KERNEL_WHEELS = HERE / "kernel-wheels.txt"
FIRST_CELL = HERE / "first_cell.py"
KERNEL_GLUE = HERE / "kernel"  # the pytree-lab-site wheel: the setup cell's logic (pytree_lab_site)
SITE_CONFIG = HERE / "jupyter-lite.json"
MANIFEST_NAME = "pytree-lab-site.json"
# Written last into every site this build makes: the list of its files and their sha256.
# A later build replaces an output folder only when this marker is there and every file
# in the folder is still one the build wrote, unchanged; anything else is refused.
MARKER_NAME = ".pytree-lab-build.json"
# The page's own check (site_check.js): every file of the site with its size and sha256, so a page
# tells a broken upload (a file missing or cut on the server) from a network failure.
FILES_NAME = "pytree-lab-files.json"
CHECK_SCRIPT = "pytree-lab-check.js"
CHECKED_PAGES = ("lab/index.html", "notebooks/index.html")
# the stored outputs' renderer, which also draws the opened notebook's preview before JupyterLab
PREVIEW_SCRIPT = "extensions/@pytree-lab/stored-outputs/static/remoteEntry.js"
FAVICON = "static/favicons/favicon.ico"  # JupyterLab's own

# The kernel, its labextension and the Pyodide it was made for move together.
JUPYTERLITE_VERSION = "0.8.6"
PYODIDE_VERSION = "314.0.6"
PYODIDE_NPM_INTEGRITY = (
    "sha512-BKDTJyIqFxC4BExLqeRS3f5xvXZIjOt8C3zGLN/Cc7tFxSwvKVhVkchQQ2AGLOtR4YrVOIFxbV8poyDOOmWwxQ=="
)
# Only what the kernel loads; the npm package's html demos, typings and maps stay out.
PYODIDE_CORE_FILES = (
    "pyodide.mjs",
    "pyodide.asm.mjs",
    "pyodide.asm.wasm",
    "python_stdlib.zip",
    "pyodide-lock.json",
    "package.json",
)
# The only packages allowed to come from outside the site: compiled for wasm by Pyodide,
# not on PyPI for any emscripten tag.
CDN_PACKAGES = ("numpy", "pandas")
# The wheels whose front ends (share/jupyter/labextensions) go into the site.
FRONT_END_WHEELS = ("jupyterlab-widgets", "anywidget", "bqplot", "bqscales")
PYODIDE_KERNEL_EXTENSION = "@jupyterlite/pyodide-kernel-extension"
# JupyterLab's widget manager; its saveState (on in jupyter-lite.json) keeps a saved notebook's widget
# models, which the next visit draws before the kernel starts (README: "Every diagram on first paint")
WIDGETS_PLUGIN = "@jupyter-widgets/jupyterlab-manager:plugin"
# Where students' work is kept (README: "How students' work is kept"): a name derived from the
# site's identity (--site-name), so the site's path on its host does not decide which copy a
# student sees and two sites on one host never mix their files; memory-only storage off.
STORAGE_SETTINGS = ("contentsStorageName", "workspacesStorageName", "settingsStorageName", "enableMemoryStorage")
SETUP_MARKER = "# pytree-lab setup:"
SETUP_TAG = "pytree-lab-setup"
LITE_KERNELSPEC = {"name": "python", "display_name": "Python (Pyodide)", "language": "python"}
# What the Pyodide kernel (jupyterlite-pyodide-kernel 0.8.6) answers to kernel_info. JupyterLab
# writes the kernel's language_info into a notebook it opens, marking it modified unless it is
# already there, equal: the site's notebooks carry it, so opening one changes nothing.
LITE_LANGUAGE_INFO = {
    "codemirror_mode": {"name": "python", "version": 3},
    "file_extension": ".py",
    "mimetype": "text/x-python",
    "name": "python",
    "nbconvert_exporter": "python",
    "pygments_lexer": "ipython3",
    "version": "3.8",
}

# How Pyodide's marker environment looks, to check wheel requirements at build time.
PYODIDE_MARKERS = {
    "sys_platform": "emscripten",
    "platform_system": "Emscripten",
    "platform_machine": "wasm32",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "python_version": "3.14",
    "python_full_version": "3.14.2",
    "extra": "",
}


class BuildError(RuntimeError):
    """The site cannot be built as pinned; the message says what to fix."""


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def log(msg: str = "") -> None:
    print(msg, flush=True)


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, text=True, capture_output=True, **kwargs)
    if proc.returncode != 0:
        raise BuildError(f"command failed ({proc.returncode}): {' '.join(map(str, cmd))}\n{proc.stdout}\n{proc.stderr}")
    return proc


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def human(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return str(n)


# ---------------------------------------------------------------- pins


@dataclass(frozen=True)
class Pin:
    name: str  # normalized
    version: str
    sha256: str


def read_pins(path: Path = KERNEL_WHEELS) -> dict[str, Pin]:
    text = path.read_text().replace("\\\n", " ")
    pins: dict[str, Pin] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+)\s+--hash=sha256:([0-9a-f]{64})", line)
        if not m:
            raise BuildError(f"{path.name}: expected `name==version --hash=sha256:...`, got {line!r}")
        pin = Pin(normalize(m[1]), m[2], m[3])
        pins[pin.name] = pin
    return pins


def check_tool_versions() -> None:
    from jupyterlite_pyodide_kernel import constants

    for dist in ("jupyterlite-core", "jupyterlite-pyodide-kernel"):
        found = importlib.metadata.version(dist)
        if found != JUPYTERLITE_VERSION:
            raise BuildError(f"{dist} {found} is installed; the site is pinned to {JUPYTERLITE_VERSION}")
    if constants.PYODIDE_VERSION != PYODIDE_VERSION:
        raise BuildError(
            f"jupyterlite-pyodide-kernel expects Pyodide {constants.PYODIDE_VERSION}, the build pins {PYODIDE_VERSION}"
        )


# ---------------------------------------------------------------- fetching (cached)


def fetch_pyodide(dest: Path) -> list[Path]:
    """Copy the Pyodide core from the npm package into dest; return the files."""
    npm_dir = CACHE / "npm"
    npm_dir.mkdir(parents=True, exist_ok=True)
    tgz = npm_dir / f"pyodide-{PYODIDE_VERSION}.tgz"
    if not tgz.exists() or npm_integrity(tgz) != PYODIDE_NPM_INTEGRITY:
        npm = shutil.which("npm")
        if not npm:
            raise BuildError("npm is needed to fetch the Pyodide core (Debian package `npm`)")
        with tempfile.TemporaryDirectory(dir=npm_dir) as tmp:
            run([npm, "pack", f"pyodide@{PYODIDE_VERSION}", "--pack-destination", tmp, "--silent"])
            os.replace(Path(tmp) / tgz.name, tgz)  # atomic: concurrent builds share the cache
    got = npm_integrity(tgz)
    if got != PYODIDE_NPM_INTEGRITY:
        tgz.unlink()
        raise BuildError(f"pyodide@{PYODIDE_VERSION} from npm has integrity {got}, expected {PYODIDE_NPM_INTEGRITY}")
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    with tarfile.open(tgz) as tar:
        for name in PYODIDE_CORE_FILES:
            member = tar.getmember(f"package/{name}")
            with tar.extractfile(member) as src, (dest / name).open("wb") as dst:
                shutil.copyfileobj(src, dst)
            out.append(dest / name)
    return out


def npm_integrity(path: Path) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def fetch_wheels(pins: dict[str, Pin]) -> dict[str, Path]:
    """pip-download the pinned wheels (pure Python only, hash-checked); name -> path."""
    wheel_dir = CACHE / "wheels"
    wheel_dir.mkdir(parents=True, exist_ok=True)
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--only-binary=:all:",
            "--require-hashes",
            # platform "any": a compiled wheel could never load in Pyodide, so refuse one here
            "--platform",
            "any",
            "--implementation",
            "py",
            "--abi",
            "none",
            "--python-version",
            PYODIDE_MARKERS["python_version"],
            "-r",
            str(KERNEL_WHEELS),
            "-d",
            str(wheel_dir),
        ]
    )
    by_name: dict[str, Path] = {}
    for whl in wheel_dir.glob("*.whl"):
        name, version = wheel_name_version(whl)
        pin = pins.get(name)
        if pin and pin.version == version and sha256_file(whl) == pin.sha256:
            by_name[name] = whl
    missing = sorted(set(pins) - set(by_name))
    if missing:
        raise BuildError(f"pinned wheels missing after download: {missing}")
    return by_name


def wheel_name_version(whl: Path) -> tuple[str, str]:
    parts = whl.name.split("-")
    return normalize(parts[0]), parts[1]


def wheel_metadata(whl: Path) -> tuple[str, str, list[str]]:
    """(normalized name, version, Requires-Dist lines) from a wheel's METADATA."""
    from email.parser import Parser

    with zipfile.ZipFile(whl) as z:
        meta_name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        meta = Parser().parsestr(z.read(meta_name).decode())
    return normalize(meta["Name"]), meta["Version"], meta.get_all("Requires-Dist") or []


# The project's own wheels, built from the checkout: the library, its Lite engine (JAX's part the
# course uses, on numpy + autograd) and the site kernel's glue (the setup cell's logic).
PROJECT_WHEELS = {
    "pytree_lab": ROOT,
    "pytree_lab_lite": ROOT / "packages" / "pytree-lab-lite",
    "pytree_lab_site": KERNEL_GLUE,
}


def build_project_wheels(dest: Path) -> list[Path]:
    """The project's own wheels (PROJECT_WHEELS), built from the checkout as it is now; the
    library's first."""
    dest.mkdir(parents=True, exist_ok=True)
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--wheel-dir",
            str(dest),
            *map(str, PROJECT_WHEELS.values()),
        ]
    )
    built = []
    for name in PROJECT_WHEELS:
        wheels = list(dest.glob(f"{name}-*.whl"))
        if len(wheels) != 1:
            raise BuildError(f"expected one {name} wheel, found {wheels}")
        built += wheels
    return built


def download(url: str, dest: Path, timeout: float = 60.0) -> None:
    """url -> dest (through a temporary file, so an interrupted download leaves nothing)."""
    import urllib.request

    tmp = dest.with_name(dest.name + ".part")
    with urllib.request.urlopen(url, timeout=timeout) as response, tmp.open("wb") as f:
        shutil.copyfileobj(response, f)
    os.replace(tmp, dest)


def include_compiled(
    lock_path: Path, dest: Path, cdn_url: str, fetch=download, cache: Path | None = None
) -> dict[str, str]:
    """Download the compiled packages (numpy, pandas) at the lock's exact URLs into dest,
    each checked against the sha256 in Pyodide's own lock; {name: file name}.

    Any failure raises BuildError with one sentence; nothing half-downloaded is kept.
    """
    lock = json.loads(lock_path.read_text())
    cache = cache or CACHE / "compiled"
    cache.mkdir(parents=True, exist_ok=True)
    included = {}
    for name in CDN_PACKAGES:
        entry = lock["packages"][name]
        file_name, expected = entry["file_name"], entry["sha256"]
        url = f"{cdn_url}/{file_name}"
        cached = cache / file_name
        if not cached.exists() or sha256_file(cached) != expected:
            cached.unlink(missing_ok=True)
            try:
                fetch(url, cached)
            except Exception as err:  # DNS, refused, timeout, HTTP error: all mean "cannot reach it"
                cached.with_name(cached.name + ".part").unlink(missing_ok=True)
                cached.unlink(missing_ok=True)
                reason = getattr(err, "reason", None) or err
                raise BuildError(
                    f"--include-compiled: Pyodide's CDN could not be reached for {name} ({url}: {reason}); "
                    "nothing was built: build without --include-compiled, or on a machine that can reach the CDN"
                ) from None
            got = sha256_file(cached)
            if got != expected:
                cached.unlink()
                raise BuildError(
                    f"--include-compiled: {name} from {url} has sha256 {got}, Pyodide's lock says {expected}; "
                    "nothing was built"
                )
        shutil.copy2(cached, dest / file_name)
        included[name] = file_name
    return included


# ---------------------------------------------------------------- bytecode (faster start)

PYODIDE_KERNEL_PYPI = Path("extensions") / PYODIDE_KERNEL_EXTENSION / "static" / "pypi"
# What the kernel imports at start comes from these; preloaded while Pyodide boots.
PRELOAD_PACKAGES = ["micropip", "ipython", "jedi"]
# What the kernel would install from its own wheel index after Pyodide booted (jupyterlite-pyodide-
# kernel 0.8.6's worker: piplite with micropip, then these with piplite): the lock names them too
# (preload), so they are preloaded with the others and the worker installs nothing.
KERNEL_START_WHEELS = ("piplite", "ipykernel", "pyodide_kernel", "comm")
KERNEL_START_PACKAGES = ["micropip", "piplite", "ipykernel", "comm", "pyodide-kernel", "jedi", "ipython"]


def ship_bytecode(site: Path, drop_sources: bool = False) -> dict:
    """Add bytecode compiled by the site's own Pyodide (Python 3.14.2, under node) to the
    stdlib zip and every wheel the kernel installs, then put the new sha256s and sizes in
    the Pyodide lock, both wheel indexes and the index URL. Returns what was compiled.

    Without bytecode the kernel compiles IPython & co. at every start (2.2 s of a cold
    start here); unchecked-hash .pyc files are used whatever the files' times.
    drop_sources (the lean site): each .py that compiled is replaced by its .pyc (smaller
    downloads; tracebacks into those files show no source lines).
    """
    node = shutil.which("node")
    if not node:
        raise BuildError(
            "node is needed to compile the site's bytecode with Pyodide's own Python (Debian package `nodejs`)"
        )
    pyodide_dir = site / "static" / "pyodide"
    jobs = [
        {
            "src": str(pyodide_dir / "python_stdlib.zip"),
            "layout": "zipimport",
            "prefix": "/lib/python314.zip",
            "drop_sources": drop_sources,
        }
    ]
    wheels = (
        sorted(pyodide_dir.glob("*.whl"))
        + sorted((site / "pypi").glob("*.whl"))
        + sorted((site / PYODIDE_KERNEL_PYPI).glob("*.whl"))
    )
    wheels = [w for w in wheels if "wasm32" not in w.name]  # compiled packages ship their own
    jobs += [
        {"src": str(w), "layout": "wheel", "prefix": "/lib/python3.14/site-packages", "drop_sources": drop_sources}
        for w in wheels
    ]
    # An archive compiled once is not compiled again: its result is cached under the sha256 of
    # the archive and of everything that shapes the output (the compiler script, Pyodide's
    # version, the layout). A rebuild after a notebook edit compiles nothing but the project's
    # own wheel.
    cache = BYTECODE_CACHE
    cache.mkdir(parents=True, exist_ok=True)
    for job in jobs:
        job["cached"] = cache / f"{bytecode_cache_key(job)}.zip"
    todo = [job for job in jobs if not (job["cached"].is_file() and job["cached"].with_suffix(".json").is_file())]
    report = []
    with tempfile.TemporaryDirectory(prefix="bytecode-") as tmp:
        if todo:
            for i, job in enumerate(todo):
                job["dst"] = str(Path(tmp) / f"{i}-{Path(job['src']).name}")
            (Path(tmp) / "jobs.json").write_text(
                json.dumps([{k: v for k, v in job.items() if k != "cached"} for job in todo])
            )
            proc = subprocess.run(
                [node, str(HERE / "bytecode.mjs"), str(pyodide_dir), str(Path(tmp) / "jobs.json")],
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                raise BuildError(
                    f"compiling bytecode with Pyodide under node failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
                )
            report = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
            if report[-1].get("python") != PYODIDE_MARKERS["python_full_version"]:
                raise BuildError(
                    f"bytecode compiled by Python {report[-1]}, the site runs {PYODIDE_MARKERS['python_full_version']}"
                )
            for job, done in zip(todo, report[:-1]):
                part = job["cached"].with_name(job["cached"].name + f".{os.getpid()}.part")
                shutil.copyfile(job["dst"], part)
                os.replace(part, job["cached"])  # atomic: concurrent builds share the cache
                job["cached"].with_suffix(".json").write_text(json.dumps({**done, "python": report[-1]["python"]}))
        compiled = {}
        for job in jobs:
            info = json.loads(job["cached"].with_suffix(".json").read_text())
            if info.get("python") != PYODIDE_MARKERS["python_full_version"]:
                raise BuildError(
                    f"cached bytecode {job['cached']} was compiled by Python {info.get('python')}; "
                    f"delete {cache} and build again"
                )
            shutil.copyfile(job["cached"], job["src"])
            compiled[Path(job["src"]).name] = info["compiled"]
    epoch = source_date_epoch()
    for w in wheels:
        os.utime(w, (epoch, epoch))
    fix_hashes(site, wheels)
    return {
        "python": PYODIDE_MARKERS["python_full_version"],
        "sources_dropped": drop_sources,
        "compiled": compiled,
        "compiled_now": len(todo),
        "from_cache": len(jobs) - len(todo),
    }


def bytecode_cache_key(job: dict) -> str:
    """What a compiled archive depends on: the archive's bytes, the compiler script, Pyodide's
    version and the job's layout (sha256 of them all)."""
    return hashlib.sha256(
        json.dumps(
            [
                sha256_file(Path(job["src"])),
                sha256_file(HERE / "bytecode.mjs"),
                PYODIDE_VERSION,
                job["layout"],
                job["prefix"],
                job["drop_sources"],
            ]
        ).encode()
    ).hexdigest()


def newest_wheels(site: Path, names) -> dict[str, Path]:
    """The site's newest wheel of each name (the kernel's index has widgetsnbextension 3 and 4)."""
    from packaging.version import Version

    wanted = {normalize(n) for n in names}
    newest: dict[str, Path] = {}
    for folder in (site / PYODIDE_KERNEL_PYPI, site / "pypi", site / "static" / "pyodide"):
        for w in folder.glob("*.whl"):
            name, version = wheel_name_version(w)
            older = newest.get(name)
            if name in wanted and (older is None or Version(version) > Version(wheel_name_version(older)[1])):
                newest[name] = w
    if set(newest) != wanted:
        raise BuildError(f"the site has no wheel for {sorted(wanted - set(newest))}")
    return newest


def fix_hashes(site: Path, wheels: list[Path]) -> None:
    """New sha256 and size of each rewritten wheel, wherever the site records them."""
    digests = {w.name: (sha256_file(w), w.stat().st_size, hashlib.md5(w.read_bytes()).hexdigest()) for w in wheels}
    lock_path = site / "static" / "pyodide" / "pyodide-lock.json"
    lock = json.loads(lock_path.read_text())
    for entry in lock["packages"].values():
        if entry["file_name"] in digests:
            entry["sha256"] = digests[entry["file_name"]][0]
    lock_path.write_text(json.dumps(lock, indent=1, sort_keys=True) + "\n")
    for index_path in (site / "pypi" / "all.json", site / PYODIDE_KERNEL_PYPI / "all.json"):
        if not index_path.exists():
            continue
        text = index_path.read_text()
        index = json.loads(text)
        for package in index.values():
            for files in package.get("releases", {}).values():
                for f in files:
                    name = f.get("filename") or f["url"].rsplit("/", 1)[-1].split("?")[0]
                    if name in digests:
                        f["digests"]["sha256"], f["size"], md5 = digests[name]
                        if "md5" in f["digests"]:
                            f["digests"]["md5"] = md5
                        if "md5_digest" in f:
                            f["md5_digest"] = md5
        index_path.write_text(json.dumps(index, indent=2, sort_keys=True))
    # jupyter-lite.json names the site index with its sha256 (a cache key)
    config_path = site / "jupyter-lite.json"
    config = json.loads(config_path.read_text())
    kernel = config["jupyter-config-data"]["litePluginSettings"][f"{PYODIDE_KERNEL_EXTENSION}:kernel"]
    new_hash = sha256_file(site / "pypi" / "all.json")
    kernel["pipliteUrls"] = [
        re.sub(r"^\./pypi/all\.json\?sha256=[0-9a-f]+$", f"./pypi/all.json?sha256={new_hash}", u)
        for u in kernel.get("pipliteUrls", [])
    ]
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True))


def preload(site: Path) -> None:
    """The kernel's start packages load with Pyodide, in parallel, instead of one by one after it
    booted: Pyodide's own (PRELOAD_PACKAGES) and the kernel's wheels, which the lock names where
    they are (the kernel's index, the site's)."""
    lock_path = site / "static" / "pyodide" / "pyodide-lock.json"
    lock = json.loads(lock_path.read_text())
    for name, wheel in newest_wheels(site, KERNEL_START_WHEELS).items():
        lock["packages"][name] = {
            "name": name,
            "version": wheel_name_version(wheel)[1],
            "file_name": os.path.relpath(wheel, lock_path.parent).replace(os.sep, "/"),
            "sha256": sha256_file(wheel),
            "install_dir": "site",
            "package_type": "package",
            "imports": [],
            "depends": [],
            "unvendored_tests": False,
        }
    lock_path.write_text(json.dumps(lock, indent=1, sort_keys=True) + "\n")
    config_path = site / "jupyter-lite.json"
    config = json.loads(config_path.read_text())
    kernel = config["jupyter-config-data"]["litePluginSettings"][f"{PYODIDE_KERNEL_EXTENSION}:kernel"]
    kernel["loadPyodideOptions"] = {"packages": list(KERNEL_START_PACKAGES)}
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True))


# ---------------------------------------------------------------- start snapshot (--snapshot)

SNAPSHOT_NAME = "kernel.snap"  # static/pyodide/kernel.snap.gz and kernel.snap.files.gz
# What the setup cell (first_cell.py) installs and imports goes into the snapshot too: the cell then
# finds it installed and imported (a restored kernel runs its first Python slower, see README).
SETUP_CELL_WHEELS = ("anywidget", "ipywidgets", "psygnal", "jupyterlab_widgets", "widgetsnbextension")
SETUP_CELL_WHEELS += ("typing_extensions", "pytree_lab", "pytree_lab_lite", "pytree_lab_site")
SNAPSHOT_IMPORTS = "import piplite.piplite, pyodide_kernel, anywidget, ipywidgets, pytree_lab_site.lite_kernel"
# Pyodide 314.0.6's loadPyodide restores a snapshot into the memory the wasm module defines, which
# is smaller than the snapshot (the INITIAL_MEMORY it sets is ignored: RangeError in restoreSnapshot):
# grow it first.
SNAPSHOT_PYODIDE_PATCH = (
    "function Ae(e,t,n){let i=e.API,s;return t&&(s=i.restoreSnapshot(t))",
    "function Ae(e,t,n){let i=e.API,s;return t&&(e.HEAP8.length<t.length&&e.growMemory(t.length),"
    "s=i.restoreSnapshot(t))",
)
# The kernel's worker (jupyterlite-pyodide-kernel 0.8.6, minified): when loadPyodideOptions names
# a snapshot, fetch it and site-packages while Pyodide's own files download, restore, write the
# files back, bind the API functions the snapshot named (lite_build/snapshot.mjs) and reseed
# `random` (its state was frozen with the snapshot). The worker's own start then finds every
# package in loadPyodideOptions.packages and `import pyodide_kernel` done: it skips the installs.
SNAPSHOT_WORKER = """\
ptlSnapshot(o){
  const name = (o.loadPyodideOptions || {}).ptlSnapshot;
  if (!name) return {};
  const base = new URL(name, o.pyodideUrl).href, held = {};
  const get = (url) => fetch(url).then((r) => {
    if (!r.ok) throw new Error(`${url}: ${r.status}`);
    return new Response(r.body.pipeThrough(new DecompressionStream("gzip"))).arrayBuffer();
  });
  this._ptlSnapshot = { held, files: get(base + ".files.gz") };
  return {
    packages: [],
    _loadSnapshot: get(base + ".gz"),
    _snapshotDeserializer: (n) => n === "public_api"
      ? new Proxy({}, { get: (_, k) => held.py[k], has: (_, k) => k in held.py })
      : (...a) => (n === "install" || n === "loadBinaryFile" ? held.py._api : held.py)[n](...a),
  };
}
async ptlRestore(){
  if (!this._ptlSnapshot) return;
  const py = this._pyodide, pack = new Uint8Array(await this._ptlSnapshot.files), made = new Set();
  this._ptlSnapshot.held.py = py;
  const size = new DataView(pack.buffer).getUint32(0, true);
  const index = JSON.parse(new TextDecoder().decode(pack.subarray(4, 4 + size)));
  let at = 4 + size;
  for (const [file, length] of index.files) {
    const dir = file.slice(0, file.lastIndexOf("/"));
    if (!made.has(dir)) { py.FS.mkdirTree(dir); made.add(dir); }
    py.FS.writeFile(file, pack.subarray(at, at + length), { canOwn: true });
    at += length;
  }
  for (const p of index.loadedPackages) py.loadedPackages[p] = "default channel";
  py.runPython("import importlib, random; importlib.invalidate_caches(); random.seed()");
}
"""
SNAPSHOT_WORKER_PATCHES = (
    ("async initialize(e){var t;", SNAPSHOT_WORKER + "async initialize(e){var t;"),
    (
        "...e.loadPyodideOptions}),this._pyodide._api.on_fatal=",
        "...e.loadPyodideOptions,...this.ptlSnapshot(e)}),await this.ptlRestore(),this._pyodide._api.on_fatal=",
    ),
)


def patch_text(path: Path, patches) -> None:
    text = path.read_text()
    for old, new in patches:
        if text.count(old) != 1:
            raise BuildError(
                f"{path.name} is not the file it was made for (Pyodide {PYODIDE_VERSION}, "
                f"jupyterlite-pyodide-kernel {JUPYTERLITE_VERSION}): {old[:50]!r} not found once"
            )
        text = text.replace(old, new)
    path.unlink()  # a new file: the one there may be a hard link to a copy that is not the site's
    path.write_text(text)


def ship_snapshot(site: Path) -> dict:
    """Make the kernel's start snapshot with the site's own Pyodide (node, lite_build/snapshot.mjs)
    and switch the site's kernel to start from it: patch Pyodide's loader and the kernel's worker,
    point loadPyodideOptions at the snapshot. Runs last on the site's Python files: the snapshot
    holds the stdlib zip's table of contents and must match the zip the site serves."""
    node = shutil.which("node")
    if not node:
        raise BuildError("node is needed to make the start snapshot with Pyodide's Python (Debian package `nodejs`)")
    pyodide_dir = site / "static" / "pyodide"
    newest = newest_wheels(site, KERNEL_START_WHEELS + SETUP_CELL_WHEELS)
    proc = subprocess.run(
        [node, str(HERE / "snapshot.mjs"), str(site), str(pyodide_dir / SNAPSHOT_NAME), SNAPSHOT_IMPORTS]
        + [*PRELOAD_PACKAGES, "--", *(str(newest[n]) for n in sorted(newest))],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise BuildError(f"making the start snapshot under node failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    patch_text(pyodide_dir / "pyodide.mjs", [SNAPSHOT_PYODIDE_PATCH])
    # the kernel's code is in each of the extension's bundles that may run it (comlink and coincident
    # workers, a shared chunk): patch every one
    bundles = sorted((site / "extensions" / PYODIDE_KERNEL_EXTENSION / "static").glob("*.js"))
    patched = [b for b in bundles if "this.initRuntime(e)" in b.read_text()]
    if not any(".worker." in b.name for b in patched):
        raise BuildError(f"--snapshot: no kernel worker found in {PYODIDE_KERNEL_EXTENSION}")
    for bundle in patched:
        patch_text(bundle, SNAPSHOT_WORKER_PATCHES)
    config_path = site / "jupyter-lite.json"
    config = json.loads(config_path.read_text())
    kernel = config["jupyter-config-data"]["litePluginSettings"][f"{PYODIDE_KERNEL_EXTENSION}:kernel"]
    kernel["loadPyodideOptions"] = {"packages": KERNEL_START_PACKAGES, "ptlSnapshot": SNAPSHOT_NAME}
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True))
    return {
        **info,
        "bytes": sum((pyodide_dir / f"{SNAPSHOT_NAME}{ext}").stat().st_size for ext in (".gz", ".files.gz")),
    }


# ---------------------------------------------------------------- the kernel starts with the page

# The site's pages start the opened notebook's kernel worker themselves (the stored outputs'
# script, loaded before JupyterLab: `startKernel`), so Pyodide's boot, the kernel's installs and
# `import pyodide_kernel` run while JupyterLab's own front end loads (seconds) instead of after
# it. The notebook's Pyodide kernel takes that worker when its options are the ones written here,
# and makes its own otherwise. Patched into jupyterlite-pyodide-kernel 0.8.6's minified bundles,
# matched exactly: the worker's start is split so that what needs no notebook (`ptlStart`) runs
# once, from whichever asks first; the drive, the notebook's folder and the kernel's globals come
# after, when JupyterLab's kernel initializes it.
KERNEL_WORKER_START = """\
ptlStart(e){
  return this._ptlStart || (this._ptlStart = (async () => {
    this._options = this._options || e;
    await this.initRuntime(e);
    await this.initPackageManager(e);
    await this.initKernel({ ...e, mountDrive: false });
  })());
}
"""
KERNEL_WORKER_PATCHES = (
    ("async initialize(e){var t;", KERNEL_WORKER_START + "async initialize(e){var t;"),
    (
        "await this.initRuntime(e),await this.initFilesystem(e),await this.initPackageManager(e),"
        "await this.initKernel(e),await this.initGlobals(e)",
        "await this.ptlStart(e),await this.initFilesystem(e),e.mountDrive&&this._localPath&&"
        'await this._pyodide.runPythonAsync(`import os\\nos.chdir("${this._localPath}")`),await this.initGlobals(e)',
    ),
)
KERNEL_PAGE_PATCH = (
    'initWorker(e){let t=e=>new Worker(e,{type:"module"});return crossOriginIsolated?',
    'initWorker(e){let t=e=>new Worker(e,{type:"module"}),w=!crossOriginIsolated&&globalThis.ptlKernelWorker&&'
    "globalThis.ptlKernelWorker(this.initRemoteOptions(e));return w?w:crossOriginIsolated?",
)


def ship_kernel_start(site: Path) -> dict:
    """Patch the kernel's bundles so that the page can start its worker (above) and return what
    the page needs for that: the worker's file and the options the kernel will give it, with
    addresses relative to the site's root (the kernel's defaults filled in as it fills them)."""
    static = Path("extensions") / PYODIDE_KERNEL_EXTENSION / "static"
    workers = sorted((site / static).glob("comlink.worker.*.js"))
    piplite = sorted((site / static / "pypi").glob("piplite-*.whl"))
    pages = [b for b in sorted((site / static).glob("*.js")) if KERNEL_PAGE_PATCH[0] in b.read_text()]
    if len(workers) != 1 or len(piplite) != 1 or len(pages) != 1:
        raise BuildError(
            f"{PYODIDE_KERNEL_EXTENSION} is not the version the page's early kernel start was made for "
            f"(jupyterlite-pyodide-kernel {JUPYTERLITE_VERSION}): one worker, one piplite wheel, one kernel "
            f"chunk expected, found {len(workers)}, {len(piplite)}, {len(pages)}"
        )
    patch_text(workers[0], KERNEL_WORKER_PATCHES)
    patch_text(pages[0], [KERNEL_PAGE_PATCH])
    config = json.loads((site / "jupyter-lite.json").read_text())
    kernel = config["jupyter-config-data"]["litePluginSettings"][f"{PYODIDE_KERNEL_EXTENSION}:kernel"]
    pyodide_url = kernel["pyodideUrl"]
    return {
        "worker": (static / workers[0].name).as_posix(),
        "pyodideUrl": pyodide_url,
        "indexUrl": pyodide_url[: pyodide_url.rfind("/") + 1],
        "pipliteWheelUrl": kernel.get("pipliteWheelUrl") or (static / "pypi" / piplite[0].name).as_posix(),
        "pipliteUrls": [*kernel.get("pipliteUrls", []), (static / "pypi" / "all.json").as_posix()],
        "disablePyPIFallback": bool(kernel.get("disablePyPIFallback")),
        "loadPyodideOptions": kernel.get("loadPyodideOptions", {}),
    }


# ---------------------------------------------------------------- the lock file


def rewrite_lock(
    lock_path: Path, wheels: dict[str, Path], cdn_url: str, included: dict[str, str] | None = None
) -> dict:
    """Point lock entries at local wheels where we ship one, else at the CDN (absolute).

    Returns {"local": {name: file}, "cdn": {name: url}} for the manifest.
    """
    lock = json.loads(lock_path.read_text())
    local, cdn = {}, {}
    for entry in lock["packages"].values():
        name = normalize(entry["name"])
        whl = wheels.get(name)
        if included and name in included:
            local[name] = entry["file_name"] = included[name]  # Pyodide's own file: its sha256 stays
        elif whl is not None:
            if wheel_name_version(whl)[1] != entry["version"]:
                raise BuildError(
                    f"{name}: kernel-wheels.txt pins {wheel_name_version(whl)[1]}, "
                    f"Pyodide {PYODIDE_VERSION} locks {entry['version']}; pin the lock's version"
                )
            entry["file_name"] = whl.name
            entry["sha256"] = sha256_file(whl)  # PyPI's bytes, not Pyodide's rebuild
            local[name] = whl.name
        else:
            entry["file_name"] = f"{cdn_url}/{entry['file_name']}"
            cdn[name] = entry["file_name"]
    # Every dependency of a local package must be local too, or booting would go outside.
    for entry in lock["packages"].values():
        if normalize(entry["name"]) in local:
            outside = [d for d in entry["depends"] if normalize(d) not in local]
            if outside:
                raise BuildError(f"{entry['name']} is shipped locally but depends on {outside} from the CDN")
    for name in CDN_PACKAGES:
        entry = lock["packages"][name]
        outside = [d for d in entry["depends"] if normalize(d) not in local and normalize(d) not in CDN_PACKAGES]
        if outside:
            raise BuildError(f"{name} needs {outside} from the CDN; pin them in kernel-wheels.txt")
    lock_path.write_text(json.dumps(lock, indent=1, sort_keys=True) + "\n")
    return {"local": local, "cdn": cdn, "lock": lock}


def check_requirements(index_wheels: list[Path], lock: dict, extension_index: dict) -> None:
    """Every requirement of a site wheel must be met, at a fitting version, without PyPI
    (which the site turns off): by the site's wheels, the lock file, or the kernel's shims."""
    from packaging.requirements import Requirement

    versions: dict[str, set[str]] = {}
    for entry in lock["packages"].values():
        # from the lock: what the site ships, and the compiled packages allowed from the CDN
        if "/" not in entry["file_name"] or normalize(entry["name"]) in CDN_PACKAGES:
            versions.setdefault(normalize(entry["name"]), set()).add(entry["version"])
    for whl in index_wheels:
        name, version, _ = wheel_metadata(whl)
        versions.setdefault(name, set()).add(version)
    for name, data in extension_index.items():
        versions.setdefault(normalize(name), set()).update(data.get("releases", {}))
    problems = []
    for whl in index_wheels:
        name, _, requires = wheel_metadata(whl)
        for line in requires:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate(PYODIDE_MARKERS):
                continue
            found = versions.get(normalize(req.name), set())
            if not any(req.specifier.contains(v, prereleases=True) for v in found):
                problems.append(f"{name} needs {req}; the site has {sorted(found) or 'none'}")
    if problems:
        raise BuildError("the kernel would need PyPI for:\n  " + "\n  ".join(problems))


def lite_kernel_array_packages() -> list[str]:
    """ARRAY_PACKAGES of pytree_lab_site.lite_kernel (what the setup cell's setup() installs),
    read from the checkout's source: the build environment need not import it."""
    import ast

    source = (KERNEL_GLUE / "pytree_lab_site" / "lite_kernel.py").read_text()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "ARRAY_PACKAGES" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise BuildError("pytree_lab_site/lite_kernel.py has no ARRAY_PACKAGES list")


def check_setup_cell_installs(projects: list[Path]) -> None:
    """The setup cell installs the project's wheels without deps (so diagrams need no numpy), so
    it must name every runtime dependency itself; fail when a pyproject gains one it lacks."""
    from packaging.requirements import Requirement

    named = {normalize(n) for n in re.findall(r'"([A-Za-z0-9._-]+)"', setup_cell_source())}
    named |= {normalize(n) for n in lite_kernel_array_packages()}
    missing = []
    for project in projects:
        name, _, requires = wheel_metadata(project)
        missing += [
            f"{name}: {req}"
            for req in map(Requirement, requires)
            if (req.marker is None or req.marker.evaluate(PYODIDE_MARKERS)) and normalize(req.name) not in named
        ]
        if name not in named:
            missing.append(f"{name} itself")
    if missing:
        raise BuildError(f"first_cell.py does not install these dependencies of the project's wheels: {missing}")


# ---------------------------------------------------------------- notebooks


def setup_cell_source() -> str:
    return FIRST_CELL.read_text().rstrip("\n")


def read_notebook(src: Path) -> dict:
    """The notebook's JSON, checked against the notebook format; a broken file fails the
    build naming it (a site whose notebook cannot open would only fail in the browser)."""
    import copy
    import warnings

    import nbformat

    try:
        nb = json.loads(src.read_text(encoding="utf-8"))
        if not isinstance(nb, dict):
            raise ValueError("the file is not a JSON object")
        with warnings.catch_warnings():  # e.g. cells without ids: nbformat fixes those itself
            warnings.simplefilter("ignore")
            nbformat.validate(copy.deepcopy(nb))  # a copy: validate may repair in place
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError, nbformat.ValidationError) as err:
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise BuildError(f"{src}: not a valid notebook ({first_line})") from None
    return nb


def check_staged_notebooks(files_dir: Path, rels: list[str]) -> None:
    """What the site will serve must still be a valid notebook after the setup cell went in."""
    for rel in rels:
        read_notebook(files_dir / rel)


def stage_notebook(src: Path, dest: Path, site_path: str | None = None) -> str:
    """Copy a notebook for the site; say how its setup cell was found.

    "injected" (it had none, the canonical one was put first), "canonical" (its first code
    cell is first_cell.py verbatim) or "replaced" (it started with an older or edited setup
    cell, whose source is replaced by first_cell.py: the site's setup has one source).

    The copy opens on the Pyodide kernel (a CPython kernelspec would make the page ask the
    student which kernel to start) and starts with the setup cell.
    """
    nb = read_notebook(src)
    nb.setdefault("metadata", {})["kernelspec"] = dict(LITE_KERNELSPEC)
    nb["metadata"]["language_info"] = json.loads(json.dumps(LITE_LANGUAGE_INFO))
    if site_path is not None:
        # which published notebook a student's copy came from, and which version of it: the
        # setup cell compares this with the site's current file to tell of an update
        nb["metadata"]["pytree_lab"] = {
            "site_path": site_path,
            "site_version": hashlib.sha256(src.read_bytes()).hexdigest()[:16],
        }
    cells = nb.get("cells", [])
    first_code = next((c for c in cells if c.get("cell_type") == "code"), None)
    first_source = "".join(first_code.get("source", "")) if first_code is not None else ""
    source = setup_cell_source()
    has_setup = first_source.lstrip().startswith(SETUP_MARKER)
    if not has_setup:
        lines = source.splitlines(keepends=True)
        cell = {
            "cell_type": "code",
            "execution_count": None,
            "metadata": {"tags": [SETUP_TAG]},
            "outputs": [],
            "source": lines,
        }
        if nb.get("nbformat", 4) >= 4 and nb.get("nbformat_minor", 0) >= 5:
            cell["id"] = SETUP_TAG
        nb["cells"] = [cell, *cells]
        how = "injected"
    elif first_source.rstrip("\n") == source:
        how = "canonical"
    else:
        first_code["source"] = source.splitlines(keepends=True)
        first_code["outputs"], first_code["execution_count"] = [], None
        how = "replaced"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return how


def collect_notebooks(extra: list[Path]) -> list[tuple[Path, str]]:
    """(source, relative name) for content/*.ipynb and each extra file or folder."""
    found = [(p, p.name) for p in sorted((ROOT / "content").glob("*.ipynb"))]
    for path in extra:
        path = path.resolve()
        if path.is_dir():
            found += [
                (p, p.relative_to(path).as_posix())
                for p in sorted(path.rglob("*.ipynb"))
                if ".ipynb_checkpoints" not in p.parts
            ]
        elif path.suffix == ".ipynb":
            found.append((path, path.name))
        else:
            raise BuildError(f"--contents: {path} is not a notebook or folder")
    return found


# ---------------------------------------------------------------- the build


def default_site_name() -> str:
    """The site's identity when --site-name is not given: the repository it is built from (its
    `origin` URL, else the checkout's path), as "<repository>-<8 hex digits>". Rebuilds of one
    course keep it (students keep their work across updates); a course built from another
    repository gets another one."""
    try:
        origin = subprocess.run(
            ["git", "-C", str(ROOT), "config", "--get", "remote.origin.url"], capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        origin = ""
    identity = origin or str(ROOT)
    base = re.sub(r"\.git$", "", identity.rstrip("/")).rsplit("/", 1)[-1].rsplit(":", 1)[-1] or "course"
    return f"{base}-{hashlib.sha256(identity.encode()).hexdigest()[:8]}"


def storage_name(site_name: str) -> str:
    """The browser storage (IndexedDB) name of a site's students' files, workspaces and settings."""
    return f"pytree-lab: {site_name}"


def site_config(site_name: str) -> dict:
    """jupyter-lite.json for a site: lite_build/jupyter-lite.json with this site's storage names."""
    if not site_name.strip() or any(ord(c) < 32 for c in site_name) or len(site_name) > 100:
        raise BuildError(f"--site-name {site_name!r}: give a short name of printable characters (e.g. ml-2026-fall)")
    config = json.loads(SITE_CONFIG.read_text())
    data = config["jupyter-config-data"]
    for key in STORAGE_SETTINGS:
        if key.endswith("StorageName"):
            data[key] = storage_name(site_name.strip())
    return config


def source_date_epoch() -> int:
    """Timestamps in the site come from the last commit, so rebuilds of one commit match."""
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "log", "-1", "--format=%ct"], capture_output=True, text=True, check=True
        ).stdout.strip()
        return int(out)
    except (OSError, subprocess.CalledProcessError, ValueError):
        return 315532800  # 1980-01-01, the zip epoch


# Files a static host needs beside the site (GitHub Pages: a custom domain, no Jekyll). An
# output folder holding only these (and empty folders) is accepted; they are kept.
HOST_FILES = ("CNAME", ".nojekyll", "robots.txt", "_headers", "_redirects", "404.html")
STAGING_PREFIX = "-building-"  # .{output folder's name}-building-XXXX beside the output folder
STAGING_OWNER = ".pytree-lab-staging.json"  # in every staging folder: which process made it


def check_output_path(output_dir: Path) -> None:
    """Refuse output folders that are not a site's own place: the filesystem root, the home
    folder, the checkout or one holding it, the course's own content folder."""
    resolved = output_dir.resolve()
    if resolved == Path(resolved.anchor):
        raise BuildError(f"--output-dir {output_dir} is the filesystem's root; choose a new folder for the site")
    for what, place in (("this checkout", ROOT), ("your home folder", Path.home()), ("the current folder", Path.cwd())):
        try:
            place = place.resolve()
        except OSError:
            continue
        if resolved == place or resolved in place.parents:
            raise BuildError(
                f"--output-dir {output_dir} is {what} or holds it; the site needs a folder of its own "
                "(e.g. lite_build/_output or a new folder)"
            )
    if resolved == ROOT / "content" or ROOT / "content" in resolved.parents:
        raise BuildError(f"--output-dir {output_dir} is inside the course's content/ folder; choose another folder")


def read_marker(marker: Path) -> dict[str, str]:
    """The files an earlier build wrote ({relative path: sha256}), or BuildError naming the
    marker when it is not what this build writes."""
    problem = None
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
        files = data.get("files") if isinstance(data, dict) else None
        if not isinstance(files, dict):
            problem = "it has no list of files"
        elif not all(
            isinstance(k, str)
            and isinstance(v, str)
            and re.fullmatch(r"[0-9a-f]{64}", v)
            and k
            and not k.startswith("/")
            and ".." not in k.split("/")
            for k, v in files.items()
        ):
            problem = "its list of files is not paths with sha256 digests"
    except (OSError, ValueError) as err:
        problem = f"it is not readable JSON ({type(err).__name__})"
    if problem:
        raise BuildError(
            f"{marker} is not a marker this build wrote ({problem}); nothing was changed: move the "
            "folder away or choose another --output-dir"
        )
    return files


def check_output_dir(output_dir: Path) -> list[str]:
    """Check the output folder can take a new site; return what in it is to be kept.

    Allowed: a missing folder; a folder holding only host files (HOST_FILES) and empty folders;
    a site an earlier build made (its marker lists the files it wrote, with their sha256), with
    anything else put in it since (a CNAME, a .nojekyll, a folder of the host's). Everything the
    earlier build did not write is kept: it moves into the new site unchanged. Refused: a file
    the build wrote that was edited since, a kept entry where the new site has a file, any other
    non-empty folder. A refusal looks no further than the first entry it cannot accept.
    """
    if output_dir.is_symlink():
        raise BuildError(
            f"the output path {output_dir} is a symbolic link; give the folder it points to, or another --output-dir"
        )
    if not output_dir.exists():
        return []
    if not output_dir.is_dir():
        raise BuildError(f"the output path {output_dir} is a file, not a folder; choose another --output-dir")
    marker = output_dir / MARKER_NAME
    if not marker.is_file() or marker.is_symlink():
        kept = []
        with os.scandir(output_dir) as entries:
            for entry in entries:
                if entry.is_symlink() or not (
                    (entry.name in HOST_FILES and entry.is_file()) or (entry.is_dir() and _is_empty(entry.path))
                ):
                    raise BuildError(
                        f"{output_dir} is not empty and was not made by this build (no {MARKER_NAME}; it holds "
                        f"{entry.name!r}); nothing was changed: choose an empty or new --output-dir"
                    )
                kept.append(entry.name + ("/" if entry.is_dir() else ""))
        return sorted(kept)
    written = read_marker(marker)
    folders = {"/".join(rel.split("/")[:i]) for rel in written for i in range(1, rel.count("/") + 1)}
    kept, changed = [], []

    def walk(folder: str, rel: str) -> None:
        with os.scandir(folder) as entries:
            found = list(entries)
        for entry in found:
            path = rel + entry.name
            if path == MARKER_NAME:
                continue
            if entry.is_symlink():
                kept.append(path)
            elif entry.is_dir():
                if path in folders:
                    walk(entry.path, path + "/")
                else:
                    kept.append(path + "/")  # not the build's: kept whole, not walked
            elif path in written:
                if sha256_file(Path(entry.path)) != written[path]:
                    changed.append(path)
            else:
                kept.append(path)

    walk(str(output_dir), "")
    if changed:
        listed = ", ".join(changed[:5]) + (" ..." if len(changed) > 5 else "")
        raise BuildError(
            f"{output_dir} holds files this build wrote that changed since ({listed}); "
            "nothing was changed: move them away (or restore them) and build again"
        )
    return sorted(kept)


def _is_empty(folder: str) -> bool:
    with os.scandir(folder) as it:
        return next(it, None) is None


def add_site_check(site: Path, kernel_start: dict | None = None) -> None:
    """The page's check of the site (site_check.js, loaded first by the pages students open) and
    the list of files it checks against, written last so that it lists every other file; the
    stored outputs' script, which draws the lesson and starts its kernel before JupyterLab."""
    shutil.copyfile(HERE / "site_check.js", site / CHECK_SCRIPT)
    for page in CHECKED_PAGES:
        path = site / page
        text = path.read_text()
        if "<head>" not in text:
            raise BuildError(f"{page} has no <head>: the site's check cannot be loaded there")
        text = text.replace("<head>", f'<head>\n    <script src="../{CHECK_SCRIPT}"></script>', 1)
        if 'rel="icon"' not in text and (site / FAVICON).is_file():  # else a reload asks for /favicon.ico: 404
            text = text.replace("</head>", f'  <link rel="icon" href="../{FAVICON}">\n  </head>', 1)
        if (site / PREVIEW_SCRIPT).is_file():  # the stored lesson, drawn while JupyterLab starts
            start = (
                f' data-ptl-kernel="{html.escape(json.dumps(kernel_start, sort_keys=True))}"' if kernel_start else ""
            )
            tag = f'<script async data-ptl-preview{start} src="../{PREVIEW_SCRIPT}"></script>'
            text = text.replace("</head>", f"  {tag}\n  </head>", 1)
        path.write_text(text)
    files = {
        p.relative_to(site).as_posix(): [p.stat().st_size, sha256_file(p)]
        for p in sorted(site.rglob("*"))
        if p.is_file() and p.name not in (FILES_NAME, MARKER_NAME)
    }
    (site / FILES_NAME).write_text(json.dumps({"files": files}, indent=0, sort_keys=True) + "\n")


def write_marker(site: Path, kept: tuple = ()) -> None:
    """The list of files this build wrote in `site` (kept entries are not the build's)."""
    skip = {k.rstrip("/") for k in kept}

    def ours(rel: str) -> bool:
        return not any(rel == k or rel.startswith(k + "/") for k in skip)

    files = {
        rel: sha256_file(p)
        for p in sorted(site.rglob("*"))
        if p.is_file() and not p.is_symlink() and p.name != MARKER_NAME and ours(rel := p.relative_to(site).as_posix())
    }
    (site / MARKER_NAME).write_text(
        json.dumps({"made_by": "pytree-lab lite_build/build.py", "files": files}, indent=0, sort_keys=True) + "\n"
    )


def swap_in(staged: Path, output_dir: Path, scratch: Path) -> list[str]:
    """Put the finished site at output_dir, carrying over what the earlier folder held that no
    build wrote (checked again now: someone may have written into it during the build); the
    earlier site's own files go only now. Returns the entries kept."""
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    if not output_dir.exists():
        os.replace(staged, output_dir)
        return []
    kept = check_output_dir(output_dir)
    clashes = [k for k in kept if os.path.lexists(staged / k.rstrip("/"))]
    if clashes:
        raise BuildError(
            f"{output_dir} holds {', '.join(clashes[:5])}, which the new site also has; nothing was "
            "changed: move them away and build again"
        )
    moved = []
    try:
        for k in kept:
            rel = k.rstrip("/")
            (staged / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(output_dir / rel, staged / rel)
            moved.append(rel)
    except OSError:
        for rel in moved:  # put back what moved; the earlier site stays as it was
            os.replace(staged / rel, output_dir / rel)
        raise
    old = scratch / "previous-site"
    os.replace(output_dir, old)
    os.replace(staged, output_dir)
    late = check_output_dir(old) if (old / MARKER_NAME).is_file() else []
    if late:  # written in the instant between the check and the move: never deleted
        keep = output_dir.parent / f"{output_dir.name}-previous-{os.getpid()}"
        os.replace(old, keep)
        log(f"  files written into the earlier site during the swap are kept in {keep}")
    else:
        shutil.rmtree(old)
    return kept


def remove_stale_staging(output_dir: Path) -> list[str]:
    """Remove staging folders that earlier builds of this output folder left when they were
    killed: only folders holding this build's owner file, whose process is gone."""
    removed = []
    prefix = f".{output_dir.name}{STAGING_PREFIX}"
    try:
        with os.scandir(output_dir.parent) as found:
            entries = list(found)
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(prefix) or entry.is_symlink() or not entry.is_dir():
            continue
        owner = Path(entry.path) / STAGING_OWNER
        try:
            info = json.loads(owner.read_text())
            pid, host = int(info["pid"]), info["host"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a folder this build made: left alone
        if host != os.uname().nodename or _alive(pid):
            continue
        size = sum(p.stat().st_size for p in Path(entry.path).rglob("*") if p.is_file() and not p.is_symlink())
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(f"{entry.name} ({human(size)})")
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def user_paths(message: str, mapping: dict[str, str]) -> str:
    """A message with each staged path replaced by the user's own file it came from."""
    for staged, source in sorted(mapping.items(), key=lambda kv: -len(kv[0])):
        message = message.replace(staged, source)
    return message


def build_site(
    output_dir: Path = DEFAULT_OUTPUT,
    contents: list[Path] | None = None,
    include_compiled_packages: bool = False,
    fast_start: bool = True,
    lean: bool = False,
    site_name: str | None = None,
    stored_outputs: bool = False,
    snapshot: bool = False,
) -> dict:
    """Build the site into a private staging folder and put it at output_dir only on success.

    An existing output_dir is replaced only when an earlier run of this build made it and it
    holds nothing else (see check_output_dir); a failed build leaves it as it was.
    lean: ship bytecode without the .py sources it was compiled from (README: the lean site).
    stored_outputs: run every notebook on the Lite engine and store its outputs (first_paint.py);
    the command line does it unless --no-stored-outputs.
    snapshot: the kernel starts from a memory snapshot made at build time (README: start snapshot).
    """
    if lean and not fast_start:
        raise BuildError("--lean drops the sources the bytecode replaces: it needs the bytecode build")
    from jupyterlite_pyodide_kernel.constants import PYODIDE_CDN_URL

    check_output_path(output_dir)
    site_name = site_name if site_name is not None else default_site_name()
    config_data = site_config(site_name)
    check_tool_versions()
    output_dir = output_dir.resolve()
    check_output_dir(output_dir)
    pins = read_pins()
    notebooks = collect_notebooks(contents or [])
    for src, _ in notebooks:  # a broken notebook fails the build before anything is made
        read_notebook(src)

    # No state survives from an earlier build (the doit database pitfall).
    for stale in (HERE / ".jupyterlite.doit.db",):
        stale.unlink(missing_ok=True)

    CACHE.mkdir(parents=True, exist_ok=True)
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    # next to the output folder, so the finished site moves in with a rename
    for removed in remove_stale_staging(output_dir):
        log(f"  removed {removed}: left by a build that was stopped")
    stage = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}{STAGING_PREFIX}", dir=output_dir.parent))
    (stage / STAGING_OWNER).write_text(json.dumps({"pid": os.getpid(), "host": os.uname().nodename}))
    paths = {}  # staged path -> the user's file, for messages
    try:
        log(f"pytree-lab JupyterLite build -> {output_dir}")
        pyodide_dir = stage / "static" / "pyodide"
        fetch_pyodide(pyodide_dir)
        log(f"  Pyodide {PYODIDE_VERSION} core from npm (integrity checked)")
        included = {}
        if include_compiled_packages:
            included = include_compiled(pyodide_dir / "pyodide-lock.json", pyodide_dir, PYODIDE_CDN_URL)
            log(f"  {', '.join(included)} from Pyodide's CDN, sha256 checked against its lock: shipped in the site")

        wheels = fetch_wheels(pins)
        log(f"  {len(wheels)} pinned wheels (sha256 checked)")
        projects = build_project_wheels(stage / "project")
        project = projects[0]
        log(f"  project wheels {', '.join(w.name for w in projects)} built from the checkout")
        check_setup_cell_installs(projects)

        lock_info = rewrite_lock(pyodide_dir / "pyodide-lock.json", dict(wheels), PYODIDE_CDN_URL, included)
        for name in lock_info["local"]:
            if name not in included:
                shutil.copy2(wheels[name], pyodide_dir / wheels[name].name)

        pypi_dir = stage / "pypi"
        pypi_dir.mkdir()
        index_wheels = [w for n, w in wheels.items() if n not in lock_info["local"]] + projects
        for whl in index_wheels:
            shutil.copy2(whl, pypi_dir / whl.name)

        kernel_ext = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / PYODIDE_KERNEL_EXTENSION
        ext_index = json.loads((kernel_ext / "static" / "pypi" / "all.json").read_text())
        check_requirements(index_wheels, lock_info["lock"], ext_index)

        # The wheel index records file times: make them the commit's, not the download's.
        epoch = source_date_epoch()
        for whl in [*pyodide_dir.glob("*.whl"), *pypi_dir.glob("*.whl")]:
            os.utime(whl, (epoch, epoch))

        files_dir = stage / "files"
        setup_cells = {}
        for src, rel in notebooks:
            paths[str(files_dir / rel)] = str(src)
            setup_cells[rel] = stage_notebook(src, files_dir / rel, rel)
        check_staged_notebooks(files_dir, [rel for _, rel in notebooks])
        files_dir.mkdir(exist_ok=True)
        extensions = []
        if stored_outputs:
            try:
                ran, modules = first_paint.run_notebooks([files_dir / rel for _, rel in notebooks], stage, MIRROR_ENV)
            except first_paint.mirror_env.MirrorError as err:
                raise BuildError(f"{err}; or build with --no-stored-outputs (outputs empty until run)") from None
            for rel, what in ran.items():
                log(f"  {rel}: {what} on the Lite engine, outputs stored")
            storage = config_data["jupyter-config-data"]["contentsStorageName"]
            previews = {rel: first_paint.preview(files_dir / rel, storage) for _, rel in notebooks}
            extensions.append(str(first_paint.write_extension(stage / "stored-outputs", modules, previews)))

        (stage / "jupyter-lite.json").write_text(json.dumps(config_data, indent=2) + "\n")
        front_ends = [str(wheels[normalize(n)]) for n in FRONT_END_WHEELS]
        # jupyter-lite re-stamps every file under the output folder's *parent* with the
        # source date, so it builds inside the private staging folder and we move it after.
        staged_output = stage / "_output"
        config = {
            "LiteBuildConfig": {
                "contents": [str(files_dir)],
                "output_dir": str(staged_output),
                "cache_dir": str(stage / ".lite-cache"),
                "no_sourcemaps": True,
                "source_date_epoch": epoch,
                # front ends come from the pinned wheels and the kernel's own extension,
                # never from whatever else happens to be installed in this environment
                "ignore_sys_prefix": ["federated_extensions"],
                "federated_extensions": [*front_ends, str(kernel_ext), *extensions],
            }
        }
        (stage / "jupyter_lite_config.json").write_text(json.dumps(config, indent=2))

        proc = subprocess.run(
            [sys.executable, "-m", "jupyterlite_core", "build", "--lite-dir", str(stage)],
            cwd=stage,
            text=True,
            capture_output=True,
        )
        if proc.returncode != 0:
            raise BuildError(f"jupyter lite build failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
        bytecode = None
        if fast_start:
            bytecode = ship_bytecode(staged_output, drop_sources=lean)
            preload(staged_output)
            log(
                f"  bytecode compiled by Pyodide's Python {bytecode['python']} for the stdlib and "
                f"{len(bytecode['compiled']) - 1} wheels ({bytecode['from_cache']} of {len(bytecode['compiled'])} "
                f"archives unchanged since an earlier build: from lite_build/.cache/bytecode); "
                f"packages preloaded at start: {', '.join(KERNEL_START_PACKAGES)}"
            )
            if lean:
                log(
                    "  lean: .py sources left out where bytecode replaces them "
                    "(tracebacks show no library source lines)"
                )
        snapshot_info = None
        if snapshot:
            snapshot_info = ship_snapshot(staged_output)
            log(
                f"  start snapshot: {human(snapshot_info['memory'])} of memory and {snapshot_info['files']} files "
                f"of site-packages, {human(snapshot_info['bytes'])} gzipped; the kernel starts from it"
            )
        kernel_start = ship_kernel_start(staged_output) if stored_outputs else None
        manifest = verify_and_describe(staged_output, lock_info, wheels, project, notebooks, setup_cells, config_data)
        manifest["site_name"] = site_name
        log(f"  students' work is kept in their browser under {storage_name(site_name)!r} (--site-name {site_name})")
        if bytecode is not None:  # how much came from the cache varies by build: logged, not recorded
            bytecode = {k: v for k, v in bytecode.items() if k not in ("compiled_now", "from_cache")}
        manifest["bytecode"] = bytecode
        manifest["snapshot"] = snapshot_info
        (staged_output / MANIFEST_NAME).write_text(json.dumps(manifest, indent=1) + "\n")
        add_site_check(staged_output, kernel_start)
        write_marker(staged_output)
        kept = swap_in(staged_output, output_dir, stage)
        print_manifest(output_dir, manifest)
        if kept:
            log(f"Kept from the earlier folder (not made by this build): {', '.join(kept)}")
        return manifest
    except BuildError as err:
        raise BuildError(user_paths(str(err), paths)) from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def verify_and_describe(output_dir, lock_info, wheels, project, notebooks, setup_cells, config_data=None) -> dict:
    """Check the built site says what we meant (the pitfalls are silent), then describe it."""
    config = json.loads((output_dir / "jupyter-lite.json").read_text())["jupyter-config-data"]
    kernel = config["litePluginSettings"]["@jupyterlite/pyodide-kernel-extension:kernel"]
    problems = []
    if kernel.get("pyodideUrl") != "./static/pyodide/pyodide.mjs":
        problems.append(f"pyodideUrl is {kernel.get('pyodideUrl')!r}, not the site's own Pyodide")
    wanted = (config_data or json.loads(SITE_CONFIG.read_text()))["jupyter-config-data"]
    for key in STORAGE_SETTINGS:
        if config.get(key) != wanted[key]:
            problems.append(
                f"{key} is {config.get(key)!r}, not {wanted[key]!r} (students' work would be kept elsewhere)"
            )
    if kernel.get("disablePyPIFallback") is not True:
        problems.append("disablePyPIFallback is not on")
    if config.get("settingsOverrides", {}).get(WIDGETS_PLUGIN, {}).get("saveState") is not True:
        problems.append("the widget manager's saveState is not on (a student's saved widgets would come back blank)")
    if not any(u.startswith("./pypi/all.json") for u in kernel.get("pipliteUrls", [])):
        problems.append("the site's wheel index ./pypi/all.json is not in pipliteUrls")
    index = json.loads((output_dir / "pypi" / "all.json").read_text())
    for whl in (w for n, w in wheels.items() if n not in lock_info["local"]):
        name, version = wheel_name_version(whl)
        if version not in index.get(name, {}).get("releases", {}):
            problems.append(f"{name} {version} is not in pypi/all.json")

    # Each front end must be byte-for-byte the one inside the wheel the kernel installs.
    extensions = {}
    for pkg_json in sorted((output_dir / "extensions").glob("**/package.json")):
        if pkg_json.parent.parent.name != "extensions" and not pkg_json.parent.parent.name.startswith("@"):
            continue
        data = json.loads(pkg_json.read_text())
        if "jupyterlab" not in data:
            continue
        ext_dir = pkg_json.parent
        extensions[data["name"]] = {
            "version": data["version"],
            "bytes": sum(p.stat().st_size for p in ext_dir.rglob("*") if p.is_file()),
            "files": sum(1 for p in ext_dir.rglob("*") if p.is_file()),
        }
    for dist in FRONT_END_WHEELS:
        whl = wheels[normalize(dist)]
        with zipfile.ZipFile(whl) as z:
            inside = [
                n for n in z.namelist() if re.search(r"share/jupyter/labextensions/(@[^/]+/)?[^/@]+/package\.json$", n)
            ]
            for member in inside:
                data = json.loads(z.read(member))
                built = output_dir / "extensions" / data["name"] / "package.json"
                if not built.exists() or json.loads(built.read_text()) != data:
                    problems.append(f"front end {data['name']} differs from the one in {whl.name}")
                else:
                    extensions[data["name"]]["from_wheel"] = whl.name
    ours = {PYODIDE_KERNEL_EXTENSION, first_paint.EXTENSION_NAME}
    expected = ours | {e for e, d in extensions.items() if d.get("from_wheel")}
    unexpected = sorted(set(extensions) - expected)
    if unexpected:
        problems.append(f"unexpected front ends in the site: {unexpected}")
    if problems:
        raise BuildError("the built site is not what was pinned:\n  " + "\n  ".join(problems))

    def entry(path: Path) -> dict:
        return {"path": path.relative_to(output_dir).as_posix(), "bytes": path.stat().st_size}

    pyodide_dir = output_dir / "static" / "pyodide"
    all_files = [p for p in output_dir.rglob("*") if p.is_file()]
    return {
        "pyodide_version": PYODIDE_VERSION,
        "pyodide_core": [entry(pyodide_dir / n) for n in PYODIDE_CORE_FILES],
        "lock_wheels": [entry(pyodide_dir / f) for f in sorted(lock_info["local"].values())],
        "included_compiled": sorted(n for n in CDN_PACKAGES if n in lock_info["local"]),
        "index_wheels": [entry(p) for p in sorted((output_dir / "pypi").glob("*.whl"))],
        "project_wheel": f"pypi/{project.name}",
        "notebooks": [entry(output_dir / "files" / rel) for _, rel in notebooks],
        "setup_cell": setup_cells,
        "extensions": extensions,
        "cdn_packages": {name: lock_info["cdn"][name] for name in CDN_PACKAGES if name in lock_info["cdn"]},
        "total_bytes": sum(p.stat().st_size for p in all_files),
        "total_files": len(all_files),
    }


def print_manifest(output_dir: Path, m: dict) -> None:
    def rows(title, entries):
        log(f"\n{title}")
        for e in entries:
            log(f"  {human(e['bytes']):>9}  {e['path']}")
        log(f"  {human(sum(e['bytes'] for e in entries)):>9}  total")

    rows(f"Pyodide {m['pyodide_version']} core (served by the site):", m["pyodide_core"])
    rows("Pyodide lock packages shipped as local wheels:", m["lock_wheels"])
    rows("Site wheel index (pypi/all.json; PyPI fallback off):", m["index_wheels"])
    rows("Notebooks:", m["notebooks"])
    for how in ("injected", "replaced"):
        names = [n for n, h in m["setup_cell"].items() if h == how]
        if names:
            note = "setup cell injected into" if how == "injected" else "setup cell replaced by first_cell.py in"
            log(f"  {note}: {', '.join(names)}")
    log("\nFront-end extensions:")
    for name, e in sorted(m["extensions"].items()):
        source = f"from {e['from_wheel']}" if e.get("from_wheel") else "the Pyodide kernel"
        if name == first_paint.EXTENSION_NAME:
            source = "this build: draws the stored outputs before the kernel starts"
        log(f"  {human(e['bytes']):>9}  {name} {e['version']} ({e['files']} files, {source})")
    if m["cdn_packages"]:
        log("\nFetched at run time from Pyodide's CDN (pinned in static/pyodide/pyodide-lock.json):")
        for name, url in m["cdn_packages"].items():
            log(f"  {name}: {url}")
    if m["included_compiled"]:
        log(f"\nShipped in the site (works offline): {', '.join(m['included_compiled'])}")
    log(f"\nSite: {m['total_files']} files, {human(m['total_bytes'])} in {output_dir}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument(
        "--contents",
        type=Path,
        action="append",
        default=[],
        help="extra notebook or folder of notebooks (besides content/*.ipynb)",
    )
    parser.add_argument(
        "--include-compiled",
        action="store_true",
        help="download numpy and pandas from Pyodide's CDN (sha256-checked against its lock) "
        "and ship them in the site, so it works fully offline",
    )
    parser.add_argument(
        "--site-name",
        default=None,
        help="this site's identity: students' work is kept in their browsers under it. Rebuilds of one "
        "course keep it; give each published site (each term) its own. Default: the repository's "
        "name and a hash of its origin URL",
    )
    parser.add_argument(
        "--lean",
        action="store_true",
        help="leave out the .py sources that bytecode replaces (a smaller site; tracebacks into "
        "library code show no source lines)",
    )
    parser.add_argument(
        "--no-stored-outputs",
        action="store_true",
        help="do not run the notebooks for their outputs (faster; the page shows empty outputs until "
        "the kernel runs them)",
    )
    parser.add_argument(
        "--snapshot",
        action="store_true",
        help="start the kernel from a memory snapshot made at build time (experimental; README: start snapshot)",
    )
    args = parser.parse_args(argv)
    try:
        build_site(
            args.output_dir,
            args.contents,
            include_compiled_packages=args.include_compiled,
            lean=args.lean,
            site_name=args.site_name,
            stored_outputs=not args.no_stored_outputs,
            snapshot=args.snapshot,
        )
    except BuildError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except OSError as err:  # a folder that cannot be written, a full disk: one sentence, no traceback
        where = f" ({err.filename})" if getattr(err, "filename", None) else ""
        print(f"error: {err.strerror or err}{where}; nothing was changed in {args.output_dir}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"stopped; nothing was changed in {args.output_dir}", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
