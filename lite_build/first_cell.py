# pytree-lab setup: in the browser version of this course (JupyterLite) this cell installs the
# course packages and says where your work is kept; anywhere else it does nothing and prints
# nothing. Run it first; no need to edit it.
import sys

if sys.platform == "emscripten":
    import piplite

    class SetupFailed(Exception):
        def _render_traceback_(self):  # one sentence, not the installer's traceback
            return [str(self)]

    # Widgets, the course package, its Lite engine (JAX's part the course uses) and the kernel's
    # glue come from this site's own wheels (no numpy needed).
    try:
        await piplite.install(["anywidget", "ipywidgets"])
        await piplite.install(["pytree-lab", "pytree-lab-lite", "pytree-lab-site"], deps=False)
    except Exception as err:
        raise SetupFailed(
            f"The course packages could not be installed from this site ({type(err).__name__}: "
            f"{str(err).splitlines()[0][:120] if str(err) else 'no detail'}): if the note at the bottom of "
            "the page names a missing or damaged file, whoever published the site should upload the whole "
            "built folder again; otherwise check the connection and reload the page."
        ) from None
    # numpy and pandas load from Pyodide's CDN in the background: the next cells run at once, a cell
    # that needs numpy waits for them (bounded) or says in one line why not; `import jax` works either way.
    import pytree_lab_site.lite_kernel

    await pytree_lab_site.lite_kernel.setup()
