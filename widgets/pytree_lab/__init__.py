"""pytree-lab: interactive widgets that teach JAX pytrees and structured parameters."""

__version__ = "0.1.0"
