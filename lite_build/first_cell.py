# pytree-lab setup: in the browser version of this course (JupyterLite) this cell installs the
# course packages and says where your work is kept; anywhere else it does nothing and prints
# nothing. Run it first; no need to edit it.
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
