"""The JupyterLite site's kernel glue: what only the browser (Pyodide) kernel runs.

* `lite_kernel` — the setup cell's `setup()`: numpy in the background, `import jax` and
  `import optax` made the Lite engine (pytree-lab-lite), the kernel without numpy.
* `lite_updates` — newer versions of the course's notebooks put beside a student's copy.
* `_without_numpy` — the Lite engine's stand-ins where numpy cannot be loaded.

Built into a wheel by lite_build/build.py and shipped in the site only; never on PyPI.
"""
