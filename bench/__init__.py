"""pytree-lab benchmarks (`make bench` = `python -m bench`): measured, printed beside targets.

Not tests: nothing here asserts a speed. Each section returns plain data that `__main__`
prints as a table and writes to artifacts/bench.json.
"""
