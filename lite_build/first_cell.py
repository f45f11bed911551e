# pytree-lab setup: installs the course packages when this notebook runs in the browser (JupyterLite).
# In a regular Jupyter kernel it does nothing. Run it first; no need to edit it.
#
# Your work in this site is kept in this browser only (not on a server, not in other browsers).
# File > Download saves a notebook to your computer. To get a fresh copy of a course notebook,
# rename or delete your copy in the file browser (download it first), then reopen the page.
import sys

if sys.platform == "emscripten":
    import piplite

    # Widgets and the course package come from this site's own wheels (no numpy needed).
    await piplite.install(["anywidget", "ipywidgets"])
    await piplite.install("pytree-lab", deps=False)
    # numpy and pandas load from Pyodide's CDN in the background: the next cells run at once, a cell
    # that needs numpy waits for them (bounded) or says in one line why not; `import jax` works either way.
    import pytree_lab.compat.lite_kernel

    await pytree_lab.compat.lite_kernel.setup()
