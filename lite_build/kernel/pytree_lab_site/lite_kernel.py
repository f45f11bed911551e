"""The JupyterLite kernel's setup: numpy loads in the background; what needs it waits, bounded.

Called by every course notebook's setup cell (lite_build/first_cell.py) in the browser, after
pytree-lab itself is installed from the site:

    await pytree_lab_site.lite_kernel.setup()

numpy and pandas are compiled for the browser and come from Pyodide's CDN (unless the site
was built with them included). `setup` starts loading them (with autograd and bqplot) in the
background and returns at once, so the cells after it run while the download goes on: a tree
diagram needs nothing of it. Before it runs each cell, the kernel looks at what the cell
imports; a cell that imports what needs numpy (`jax`, `numpy`, `pandas`, `autograd`, `bqplot`,
`optax`, pytree-lab's StepExplorer and the other array parts) waits for that same load, never a
second one, and never longer than the load's own bound:

- first the CDN is asked for the numpy file's headers, waiting at most `PROBE_SECONDS`: a
  refused request ends at once, a request that gets no answer (a filtering firewall) ends
  after the bound, not after minutes;
- then the download itself gets at most `INSTALL_SECONDS`.

If numpy arrives, `import jax` gives the Lite engine (numpy + autograd). If it does not, the
first cell that needs it says so in one paragraph, and the kernel keeps working on trees:

- `import jax` gives the tree operations (`jax.tree`, `jax.tree_util`) without numpy, and
  `jax.numpy.array` gives the values as plain Python (one leaf per array, as in JAX), so the
  lessons' trees are built and drawn;
- a cell that needs numpy shows one short line (no traceback) and Run All goes on; a name that
  such a cell left undefined is reported the same way, any other NameError keeps its traceback;
- the kernel stops trying to fetch numpy for cells that import it (a fetch that hangs would
  otherwise hang each such cell).

At the end, `setup` looks for newer versions of the course's notebooks (`lite_updates`).
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import sys
from typing import Any
from urllib.parse import urlsplit

from pytree_lab_lite import install_as_jax, use_stand_ins

from . import _without_numpy
from .lite_updates import tell_of_updates

__all__ = [
    "setup",
    "wait_for_numpy",
    "degrade",
    "short_message",
    "cell_needs_numpy",
    "PROBE_SECONDS",
    "INSTALL_SECONDS",
]

# In the browser kernel the Lite engine works without numpy too (tree operations only, until
# numpy arrives); in a regular kernel without numpy it fails as before (`pip install` is the
# answer there, not a tree-only engine).
if sys.platform == "emscripten":
    use_stand_ins(_without_numpy)

PROBE_SECONDS = 8.0  # no answer at all from the CDN in this time: treat it as unreachable
INSTALL_SECONDS = 240.0  # the CDN answered: numpy + pandas (~15 MB) on a slow school network
ARRAY_PACKAGES = ["numpy", "autograd", "bqplot"]  # bqplot brings pandas
LOCK_PACKAGES = ["numpy", "pandas"]  # compiled, in Pyodide's lock: loaded by Pyodide itself, first
# (optax is the Lite engine's subset here, installed as `optax` once numpy has arrived)
NEEDS_NUMPY_MODULES = {"numpy", "pandas", "autograd", "bqplot", "bqscales", "traittypes", "scipy", "optax"}
# what a cell may import that needs numpy once it runs: it waits for the background load
WAITS_FOR_NUMPY_MODULES = NEEDS_NUMPY_MODULES | {"jax"}
# lazily imported names of pytree_lab that need numpy
NEEDS_NUMPY_NAMES = ("StepExplorer", "PackedView", "StepResult", "gradient_step")
# pytree_lab's modules that import numpy (or jax) when they are imported
NEEDS_NUMPY_SUBMODULES = {"pytree_lab." + m for m in ("explorer", "step", "packed", "chart", "training", "engine")} | {
    "pytree_lab_lite.jax",
    "pytree_lab_lite.optax",
}

STILL_WORKS = (
    "Still working: tree diagrams (PytreeDiagram), describe and diagnose, jax.tree and "
    "jax.tree_util, and the tree lessons' plain-Python parts. "
    "Needing numpy: gradient steps (jax.grad), the StepExplorer and charts. "
    "To get them: reload the page when the network lets cdn.jsdelivr.net through, or ask "
    "for a copy of the site built with the packages included."
)


# Said by the setup cell in the browser only (in JupyterLab the files are on the server).
STORAGE_NOTE = (
    "Your work in this site is kept in this browser only (not on a server, not in other browsers): "
    "File > Download saves a notebook to your computer."
)


class _Load:
    """The one background load of the array packages in this kernel, and what came of it."""

    def __init__(self) -> None:
        self.task: asyncio.Task | None = None
        self.deadline = 0.0  # event-loop time after which nobody waits any longer
        self.bound = 0.0  # seconds: the probe's bound + the download's
        self.outcome: str | None = None  # None while loading; then "lite" or "trees-only"
        self.reason: str | None = None
        self.told = False  # the paragraph about a failed load was printed (once, in one cell)
        self.numpy_bytes: int | None = None  # Content-Length of numpy's file, from the probe
        self.where = "Pyodide's CDN"


LOAD = _Load()


def numpy_url() -> str:
    """Where this site's Pyodide lock says numpy comes from (absolute)."""
    import pyodide_js  # the running Pyodide's JS API

    entry = pyodide_js.lockfile.packages.numpy  # a JS object: attribute access
    name = str(entry.file_name)
    if "://" in name:
        return name
    base = str(pyodide_js.lockfileBaseUrl or "")
    return base.rstrip("/") + "/" + name


async def probe(url: str, seconds: float = PROBE_SECONDS) -> str | None:
    """None when the server answers a HEAD request for url within `seconds`; else why not."""
    import js
    from pyodide.ffi import JsException, to_js

    options = to_js({"method": "HEAD", "cache": "no-store"}, dict_converter=js.Object.fromEntries)
    try:
        response = await asyncio.wait_for(js.fetch(url, options), seconds)
    except TimeoutError:
        return f"no answer from {host(url)} within {seconds:.0f} s (a firewall may be dropping it)"
    except JsException:
        return f"the request to {host(url)} was refused or the network is offline"
    if not response.ok:
        return f"{host(url)} answered HTTP {response.status}"
    try:  # the size of the numpy download, for the progress line of a cell that waits for it
        LOAD.numpy_bytes = int(response.headers.get("content-length"))
    except Exception:
        LOAD.numpy_bytes = None
    return None


def host(url: str) -> str:
    return urlsplit(url).netloc or url


async def _load_array_packages(probe_seconds: float, install_seconds: float) -> str | None:
    """Probe, then download and install numpy, autograd and bqplot (+ pandas); None when they
    arrived, else why not (one phrase). Runs in the background; prints nothing."""
    import piplite

    try:
        reason = await probe(numpy_url(), probe_seconds)
    except Exception as err:  # no lock entry, no JS API: say so rather than guess
        reason = f"its address could not be found ({type(err).__name__}: {err})"
    if reason is not None:
        return reason

    async def load_then_install() -> None:
        # numpy and pandas (the big downloads) by Pyodide's own loader, once; only when numpy
        # arrived does micropip install autograd and bqplot from the site (it then finds numpy
        # loaded: a failed or stalled numpy download is never fetched a second time)
        import pyodide_js

        await pyodide_js.loadPackage(LOCK_PACKAGES)
        try:
            import numpy  # noqa: F401  (a failed download is only logged by the loader, not raised)
        except ImportError:
            raise RuntimeError("numpy did not arrive") from None
        await piplite.install(ARRAY_PACKAGES)

    try:
        await asyncio.wait_for(load_then_install(), install_seconds)
        import autograd  # noqa: F401
    except TimeoutError:
        return f"the download did not finish within {install_seconds:.0f} s"
    except Exception as err:  # anything the installer raises
        return _failed(err)
    return None


def _settle(reason: str | None) -> str:
    """Apply the load's result once: the full Lite engine, or the kernel without numpy."""
    if LOAD.outcome is None:
        LOAD.reason = reason
        if reason is None:
            install_as_jax()
            LOAD.outcome = "lite"
        else:
            degrade(reason)
            LOAD.outcome = "trees-only"
    return LOAD.outcome


def _on_done(task: asyncio.Task) -> None:
    if task.cancelled():
        _settle("the download was cancelled")
    elif (err := task.exception()) is not None:
        _settle(_failed(err))
    else:
        _settle(task.result())


async def setup(probe_seconds: float = PROBE_SECONDS, install_seconds: float = INSTALL_SECONDS) -> str:
    """Start the background load (see the module docstring) and say so in one line; "loading",
    or the load's outcome when it has ended."""
    if LOAD.task is None:
        loop = asyncio.get_event_loop()
        LOAD.bound = probe_seconds + install_seconds
        LOAD.deadline = loop.time() + LOAD.bound
        LOAD.task = asyncio.ensure_future(_load_array_packages(probe_seconds, install_seconds))
        LOAD.task.add_done_callback(_on_done)
        _wait_in_cells_that_need_numpy()
    if LOAD.outcome is not None:  # the setup cell run again after the load ended
        if LOAD.outcome == "lite":
            import numpy

            print(
                f"numpy {numpy.__version__} is loaded; `import jax` gives pytree-lab's Lite engine (numpy + autograd)."
            )
        else:
            LOAD.told = True
            print(f"numpy could not be downloaded from Pyodide's CDN: {LOAD.reason}.\n{STILL_WORKS}")
        return LOAD.outcome
    with contextlib.suppress(Exception):  # no lock entry, no browser: said as Pyodide's CDN
        LOAD.where = host(numpy_url())
        import js

        LOAD.where = "this site" if LOAD.where == str(js.location.host) else LOAD.where
    print(
        f"numpy and pandas are loading in the background (from {LOAD.where}): tree diagrams work now; "
        "a cell that needs numpy waits until they are loaded."
    )
    print(STORAGE_NOTE)
    with contextlib.suppress(Exception):  # the update check must never stop the setup
        await tell_of_updates()
    return "loading"


async def wait_for_numpy() -> str:
    """Wait (bounded) for the background load that `setup` started; "lite" or "trees-only".

    The first caller after a failed load prints what happened and what still works.
    """
    if LOAD.task is None:
        return LOAD.outcome or "trees-only"
    if LOAD.outcome is None:
        loop = asyncio.get_event_loop()
        remaining = max(0.0, LOAD.deadline - loop.time())
        started = loop.time()
        try:
            # shield: a cell that stops waiting must not cancel the one shared load
            await asyncio.wait_for(_with_progress(asyncio.shield(LOAD.task), started), remaining + 0.5)
        except TimeoutError:
            _settle(f"the download did not finish within {LOAD.bound:.0f} s")
        except Exception as err:
            _settle(_failed(err))
        if LOAD.outcome is None:  # the task ended; its callback may not have run yet
            _on_done(LOAD.task)
    if LOAD.outcome == "trees-only" and not LOAD.told:
        LOAD.told = True
        print(f"numpy could not be downloaded from Pyodide's CDN: {LOAD.reason}.\n{STILL_WORKS}")
    return LOAD.outcome or "trees-only"


PROGRESS_SECONDS = 2.0  # how often the waiting cell's progress line is rewritten


async def _with_progress(waiting: Any, started: float) -> Any:
    """Await `waiting`; after the first PROGRESS_SECONDS, keep one progress line up to date
    (rewritten in place with a carriage return), ended with how long it took."""
    loop = asyncio.get_event_loop()
    shown = 0  # the length of the progress line on screen (0: none yet)
    task = asyncio.ensure_future(waiting)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=PROGRESS_SECONDS)
            if done:
                break
            size = f" ({LOAD.numpy_bytes / 1e6:.1f} MB)" if LOAD.numpy_bytes else ""
            line = (
                f"Waiting for numpy{size} and pandas from {LOAD.where}: {loop.time() - started:.0f} s so far, "
                f"at most {LOAD.bound:.0f} s in all; this cell runs when they are loaded."
            )
            print("\r" + line, end="", flush=True)
            shown = max(shown, len(line))
        return task.result()
    finally:
        if not task.done():
            task.cancel()
        if shown:
            arrived = task.done() and not task.cancelled() and task.exception() is None and task.result() is None
            final = f"{'Loaded' if arrived else 'Stopped waiting'} after {loop.time() - started:.0f} s."
            print("\r" + final.ljust(shown), flush=True)  # blanks the rest of the longer line


def imported_modules(code: str) -> set[str] | None:
    """The modules a cell imports (absolute names; `from m import n` gives m and m.n), or None
    for a cell that does not parse."""
    try:
        tree: ast.Module | None = ast.parse(code)
    except SyntaxError:
        try:  # IPython syntax (%magics, !commands): parse what IPython will run
            from IPython import get_ipython

            shell = get_ipython()
            tree = ast.parse(shell.transform_cell(code)) if shell is not None else None
        except Exception:
            tree = None
    if tree is None:
        return None
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def cell_needs_numpy(code: str) -> bool:
    """True when the cell imports something that needs numpy (jax, numpy, pandas, autograd,
    bqplot, optax, pytree-lab's array parts, or `get_engine`, whose answer depends on numpy)."""
    modules = imported_modules(code)
    if not modules:
        return False  # nothing imported, or a syntax error the cell will report itself
    for module in modules:
        if module.split(".")[0] in WAITS_FOR_NUMPY_MODULES:
            return True
        if module == "pytree_lab.*" or module in {f"pytree_lab.{n}" for n in (*NEEDS_NUMPY_NAMES, "get_engine")}:
            return True
        if any(module == m or module.startswith(m + ".") for m in NEEDS_NUMPY_SUBMODULES):
            return True
    return False


def _wait_in_cells_that_need_numpy() -> None:
    """Before each cell the Pyodide kernel loads the lock packages the cell imports. Wrap that
    step: a cell that needs numpy first waits for the background load; once numpy could not be
    loaded, cells that import what needs it skip the fetch (it would fail or hang again)."""
    try:
        import pyodide_kernel.kernel as kernel_module
    except ImportError:
        return
    original = getattr(kernel_module, "_load_packages_from_imports", None)
    if original is None or getattr(original, "__pytree_lab__", False):
        return

    async def load_packages_from_imports(code: str, *args: Any, **kwargs: Any) -> Any:
        if cell_needs_numpy(code):
            await wait_for_numpy()  # waits for a load under way; says once what a failed one found
        if DEGRADED["on"] and {m.split(".")[0] for m in imported_modules(code) or ()} & NEEDS_NUMPY_MODULES:
            return None
        return await original(code, *args, **kwargs)

    load_packages_from_imports.__pytree_lab__ = True  # type: ignore[attr-defined]  # marks the wrapper
    kernel_module._load_packages_from_imports = load_packages_from_imports


def _failed(err: BaseException) -> str:
    text = str(err).strip()
    return f"the download failed ({type(err).__name__}: {text.splitlines()[0][:200] if text else 'no message'})"


# ---------------------------------------------------------------- without numpy


def degrade(reason: str, shell: Any = None) -> None:
    """Set the kernel up to work on trees without numpy (see the module docstring)."""
    _without_numpy.REASON["text"] = f"it could not be downloaded in this browser ({reason})"
    use_stand_ins(_without_numpy)
    DEGRADED["on"] = True
    install_as_jax()
    _stand_ins_for_pytree_lab()
    _wait_in_cells_that_need_numpy()  # once degraded, it skips the kernel's fetch for numpy
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    if shell is not None:
        shell.set_custom_exc((ImportError, NameError), _handler)
        if not getattr(shell, "_pytree_lab_cell_watch", False):
            shell.events.register("pre_run_cell", _remember_cell)
            shell._pytree_lab_cell_watch = True


DEGRADED = {"on": False}
# The source of the cell now running, and the names that cells which needed numpy did not
# get to define (a NameError for one of these is numpy's absence, any other is a real one).
CURRENT_CELL = {"source": ""}
LEFT_UNDEFINED: set[str] = set()


def _remember_cell(info: Any) -> None:
    CURRENT_CELL["source"] = getattr(info, "raw_cell", "") or ""


def names_bound(code: str) -> set[str]:
    """The names a cell's top level would define: assignments, imports, def/class, for and
    with targets (not what functions inside it bind locally)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    names: set[str] = set()
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    todo: list[ast.AST] = [tree]
    while todo:
        for node in ast.iter_child_nodes(todo.pop()):
            if isinstance(node, scopes):
                names.add(node.name)  # what its body binds is its own
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.alias) and node.name != "*":
                names.add(node.asname or node.name.split(".")[0])
            elif isinstance(node, ast.ExceptHandler) and node.name:
                names.add(node.name)
            if isinstance(node, ast.comprehension):
                todo.extend([node.iter, *node.ifs])  # its target is the comprehension's own
            elif not isinstance(node, scopes):
                todo.append(node)
    return names


def _stand_ins_for_pytree_lab() -> None:
    """`from pytree_lab import StepExplorer` still works (so a cell importing it together with
    the diagram does not fail as a whole); using it says it needs numpy."""
    import pytree_lab

    for name in NEEDS_NUMPY_NAMES:
        try:
            getattr(pytree_lab, name)
        except ImportError:
            setattr(pytree_lab, name, _without_numpy.needs_numpy(f"pytree_lab.{name}"))


def short_message(etype: type, value: BaseException) -> str | None:
    """One line for an error caused by numpy's absence; None for any other error."""
    if isinstance(value, _without_numpy.NumpyUnavailable):
        return f"{value} This cell needs numpy; the tree parts of the lesson still work."
    if isinstance(value, ImportError) and (getattr(value, "name", None) or "").split(".")[0] in NEEDS_NUMPY_MODULES:
        return (
            f"{value.name} is not available: numpy could not be downloaded in this browser "
            "(said where a cell first needed it). This cell needs it; the tree parts of the lesson still work."
        )
    if isinstance(value, NameError) and getattr(value, "name", None) in LEFT_UNDEFINED:
        return (
            f"{value} (it is set by an earlier cell that needed numpy, which could not be downloaded in this browser)."
        )
    return None


def _handler(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None) -> Any:
    """IPython custom exception handler: one line on stderr for numpy's absence (the cell
    then counts as run, so Run All goes on); any other error gets its usual traceback."""
    message = short_message(etype, value)
    if message is None:
        # IPython discards what a custom handler returns: show the usual traceback ourselves
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset, running_compiled_code=True)
        return None
    # what this cell would have defined stays undefined because of numpy, not a typo
    LEFT_UNDEFINED.update(n for n in names_bound(CURRENT_CELL["source"]) if n not in shell.user_ns)
    print(message, file=sys.stderr)
    return None
