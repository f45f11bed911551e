# pytree-lab setup: installs the course packages when this notebook runs in the browser (JupyterLite).
# In a regular Jupyter kernel it does nothing. Run it first; no need to edit it.
import sys

if sys.platform == "emscripten":
    import piplite

    # Widgets and the course package come from this site's own wheels (no numpy needed).
    await piplite.install(["anywidget", "ipywidgets"])
    await piplite.install("pytree-lab", deps=False)
    try:
        # numpy and pandas are compiled for the browser and come from Pyodide's CDN.
        await piplite.install(["numpy", "autograd", "bqplot"])
        import numpy  # a failed download is only logged by Pyodide: check it arrived
    except Exception as err:
        print(f"numpy could not be loaded ({type(err).__name__}): tree diagrams work, gradient steps need a network.")
    else:
        # JAX cannot run in the browser: `import jax` gives pytree-lab's Lite engine (numpy + autograd).
        import pytree_lab.compat

        pytree_lab.compat.install_as_jax()
