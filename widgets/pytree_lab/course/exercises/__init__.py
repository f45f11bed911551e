"""The course's exercises, one module each: its `EXERCISE` (the grader, hints and hidden cases
with it) and its reference solution. `pytree_lab.course.catalogue` lists them."""
