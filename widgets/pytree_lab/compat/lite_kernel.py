"""The JupyterLite kernel's setup: load numpy within a time bound, or say plainly what works.

Called by every course notebook's setup cell (lite_build/first_cell.py) in the browser, after
pytree-lab itself is installed from the site:

    await pytree_lab.compat.lite_kernel.setup()

numpy and pandas are compiled for the browser and come from Pyodide's CDN (unless the site
was built with them included). Before starting that download, `setup` asks the CDN for the
numpy file's headers and waits at most `PROBE_SECONDS`: a refused request ends at once, a
request that gets no answer (a filtering firewall) ends after the bound, not after minutes.
If numpy arrives, `import jax` gives the Lite engine (numpy + autograd). If it does not, the
kernel keeps working on trees:

- `import jax` gives the tree operations (`jax.tree`, `jax.tree_util`) without numpy, and
  `jax.numpy.array` gives the values as plain Python (one leaf per array, as in JAX), so the
  lessons' trees are built and drawn;
- a cell that needs numpy shows one short line (no traceback) and Run All goes on;
- the kernel stops trying to fetch numpy for cells that import it (a fetch that hangs would
  otherwise hang each such cell).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from . import _without_numpy

__all__ = ["setup", "degrade", "short_message", "PROBE_SECONDS", "INSTALL_SECONDS"]

PROBE_SECONDS = 8.0  # no answer at all from the CDN in this time: treat it as unreachable
INSTALL_SECONDS = 240.0  # the CDN answered: numpy + pandas (~15 MB) on a slow school network
ARRAY_PACKAGES = ["numpy", "autograd", "bqplot"]  # bqplot brings pandas
NEEDS_NUMPY_MODULES = {"numpy", "pandas", "autograd", "bqplot", "bqscales", "traittypes", "scipy"}
# lazily imported names of pytree_lab that need numpy
NEEDS_NUMPY_NAMES = ("StepExplorer", "PackedView", "StepResult", "gradient_step")

STILL_WORKS = (
    "Still working: tree diagrams (PytreeDiagram), describe and diagnose, jax.tree and "
    "jax.tree_util, and the tree lessons' plain-Python parts. "
    "Needing numpy: gradient steps (jax.grad), the StepExplorer and charts. "
    "To get them: reload the page when the network lets cdn.jsdelivr.net through, or ask "
    "for a copy of the site built with the packages included."
)


def numpy_url() -> str:
    """Where this site's Pyodide lock says numpy comes from (absolute)."""
    import pyodide_js  # the running Pyodide's JS API

    entry = getattr(pyodide_js.lockfile.packages, "numpy")  # a JS object: attribute access
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
    except (asyncio.TimeoutError, TimeoutError):
        return f"no answer from {host(url)} within {seconds:.0f} s (a firewall may be dropping it)"
    except JsException:
        return f"the request to {host(url)} was refused or the network is offline"
    if not response.ok:
        return f"{host(url)} answered HTTP {response.status}"
    return None


def host(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).netloc or url


async def setup(probe_seconds: float = PROBE_SECONDS, install_seconds: float = INSTALL_SECONDS) -> str:
    """Load numpy, autograd and bqplot, then make `import jax` work. Returns "lite" (numpy
    arrived) or "trees-only"; prints one short paragraph either way."""
    import piplite

    from . import install_as_jax

    reason = None
    try:
        reason = await probe(numpy_url(), probe_seconds)
    except Exception as err:  # no lock entry, no JS API: say so rather than guess
        reason = f"its address could not be found ({type(err).__name__}: {err})"
    if reason is None:
        try:
            await asyncio.wait_for(piplite.install(ARRAY_PACKAGES), install_seconds)
            import numpy  # noqa: F401  (a failed download may only be logged: check it arrived)
            import autograd  # noqa: F401
        except (asyncio.TimeoutError, TimeoutError):
            reason = f"the download did not finish within {install_seconds:.0f} s"
        except Exception as err:  # anything the installer raises
            reason = f"the download failed ({type(err).__name__}: {first_line(err)})"
    if reason is None:
        engine = install_as_jax()
        import numpy

        print(f"Ready: numpy {numpy.__version__} loaded; `import jax` gives "
              + ("JAX." if engine == "jax" else "pytree-lab's Lite engine (numpy + autograd)."))
        return "lite"
    degrade(reason)
    print(f"numpy could not be downloaded from Pyodide's CDN: {reason}.\n{STILL_WORKS}")
    return "trees-only"


def first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:200] if text else "no message"


# ---------------------------------------------------------------- without numpy


def degrade(reason: str, shell: Any = None) -> None:
    """Set the kernel up to work on trees without numpy (see the module docstring)."""
    _without_numpy.REASON["text"] = f"it could not be downloaded in this browser ({reason})"
    _without_numpy.ALLOWED["on"] = True
    from . import install_as_jax

    install_as_jax()
    _stand_ins_for_pytree_lab()
    _no_fetch_for_numpy_imports()
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    if shell is not None:
        shell.set_custom_exc((ImportError, NameError), _handler)


def _stand_ins_for_pytree_lab() -> None:
    """`from pytree_lab import StepExplorer` still works (so a cell importing it together with
    the diagram does not fail as a whole); using it says it needs numpy."""
    import pytree_lab

    for name in NEEDS_NUMPY_NAMES:
        try:
            getattr(pytree_lab, name)
        except ImportError:
            module = sys.modules.get("pytree_lab")
            setattr(module, name, _without_numpy.needs_numpy(f"pytree_lab.{name}"))


def _no_fetch_for_numpy_imports() -> None:
    """The Pyodide kernel fetches lock packages a cell imports before running it; for numpy
    that fetch would fail or hang again. Skip it for cells that import what needs numpy."""
    try:
        import pyodide_kernel.kernel as kernel_module
        from pyodide.code import find_imports
    except ImportError:
        return
    original = getattr(kernel_module, "_load_packages_from_imports", None)
    if original is None or getattr(original, "__pytree_lab__", False):
        return

    async def load_packages_from_imports(code: str, *args: Any, **kwargs: Any) -> Any:
        try:
            wanted = {name.split(".")[0] for name in find_imports(code)}
        except Exception:
            wanted = set()
        if wanted & NEEDS_NUMPY_MODULES:
            return None
        return await original(code, *args, **kwargs)

    load_packages_from_imports.__pytree_lab__ = True
    kernel_module._load_packages_from_imports = load_packages_from_imports


def short_message(etype: type, value: BaseException) -> str | None:
    """One line for an error caused by numpy's absence; None for any other error."""
    if isinstance(value, _without_numpy.NumpyUnavailable):
        return f"{value} This cell needs numpy; the tree parts of the lesson still work."
    if isinstance(value, ImportError) and (getattr(value, "name", None) or "").split(".")[0] in NEEDS_NUMPY_MODULES:
        return (f"{value.name} is not available: numpy could not be downloaded in this browser "
                "(see the setup cell). This cell needs it; the tree parts of the lesson still work.")
    if isinstance(value, NameError):
        return (f"{value} (probably set by an earlier cell that needed numpy, which could not be "
                "loaded here; see the setup cell).")
    return None


def _handler(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None) -> Any:
    """IPython custom exception handler: one line on stderr for numpy's absence (the cell
    then counts as run, so Run All goes on); any other error gets its usual traceback."""
    message = short_message(etype, value)
    if message is None:
        return shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
    print(message, file=sys.stderr)
    return None
