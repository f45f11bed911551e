"""The JupyterLite site of pytree-lab: build (build.py), serve (serve.py), browse (browse.py)."""
