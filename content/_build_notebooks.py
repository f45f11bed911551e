"""Generate the course notebooks in content/ from the source below.

    .venv/bin/python content/_build_notebooks.py           # write content/*.ipynb
    .venv/bin/python content/_build_notebooks.py --check   # exit 1 if a notebook is out of date

The notebooks are committed without outputs. Editing them here keeps every change reviewable
as plain text and every regeneration identical (cell ids are fixed, not random).

Cell conventions the tests rely on (tests/test_notebooks.py):
- the first cell is lite_build/first_cell.py verbatim (tag `pytree-lab-setup`): it installs the
  package in a JupyterLite kernel and does nothing in a regular one;
- a student's exercise cell is tagged `exercise:<id>` and holds only the scaffold (`...` where
  the answer goes); the check cell after it handles the unanswered state without an error;
- cells whose output the tests read have stable ids.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FIRST_CELL = ROOT / "lite_build" / "first_cell.py"
SETUP_TAG = "pytree-lab-setup"

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def _text(source: str) -> str:
    return textwrap.dedent(source).strip("\n")


def md(source: str) -> dict:
    return {"kind": "markdown", "source": _text(source)}


def code(source: str, id: str | None = None, tags: tuple[str, ...] = ()) -> dict:
    return {"kind": "code", "source": _text(source), "id": id, "tags": list(tags)}


def exercise(exercise_id: str, source: str) -> dict:
    return code(source, id=f"exercise-{exercise_id.replace('_', '-')}", tags=(f"exercise:{exercise_id}",))


def setup_cell() -> dict:
    if FIRST_CELL.exists():
        source = FIRST_CELL.read_text().rstrip("\n")
    else:  # the Lite build has not provided its setup cell yet
        source = "# setup"
    return {"kind": "code", "source": source, "id": SETUP_TAG, "tags": [SETUP_TAG]}


def build(cells: list[dict], stem: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    seen: set[str] = set()
    for n, cell in enumerate([setup_cell(), *cells]):
        cell_id = cell.get("id") or f"{stem}-{n:02d}"
        if cell_id in seen:
            raise ValueError(f"duplicate cell id {cell_id!r} in {stem}")
        seen.add(cell_id)
        if cell["kind"] == "markdown":
            made = nbformat.v4.new_markdown_cell(cell["source"], id=cell_id)
        else:
            made = nbformat.v4.new_code_cell(cell["source"], id=cell_id)
            if cell["tags"]:
                made.metadata["tags"] = cell["tags"]
        nb.cells.append(made)
    nbformat.validate(nb)
    return nb


# =========================================================================== 01: the pytree lesson

PYTREES = [
    md(r"""
    # Pytrees and structured parameters

    About 60 minutes · runs on a CPU

    **What you will be able to do**

    - Identify the containers, leaves and structure of a pytree
    - Derive the gradient tree that matches a parameter tree
    - Apply corresponding leaves to each other, never unrelated arrays
    - Keep metadata apart from the state you differentiate

    **How this notebook works.** Run the cells from top to bottom (the first one sets things up and
    needs no editing). Diagrams, sliders and buttons are live: they compute in this notebook's kernel.
    Exercise cells contain `...` where your code goes; the cell after each one checks your answer,
    and says *not answered yet* until you have written one. At the end, one call saves your evidence.
    """),
    md(r"""
    ## Which engine computes here

    In JupyterLab on your own machine, `import jax` is real JAX. In the browser version of this
    course (JupyterLite), JAX cannot be installed: its compiled core has no WebAssembly build. There,
    `import jax` gives pytree-lab's small Lite engine instead (numpy + autograd, following
    `jax.tree_util`'s rules and JAX's float32 default), so the lesson's code runs unchanged and gives
    the same numbers. The next cell says which engine you have.
    """),
    code(r"""
    import jax
    import jax.numpy as jnp

    from pytree_lab import (
        CheckButton,
        EvidenceButton,
        PytreeDiagram,
        StepExplorer,
        describe,
        diagnose,
        get_engine,
        grad_structure_quiz,
        lesson_prediction,
        record_output,
        save_evidence,
    )

    print("computing with", get_engine().name)
    """, id="imports"),
    md(r"""
    ## The problem

    Our model has a weight vector and a bias. How do we keep each parameter paired with its own
    gradient? We store both in a small nested structure called a **pytree**, derive one gradient
    step by hand, and check that JAX follows the same structure. The tree is nothing more than a way
    to keep related values organised.

    ## The idea

    A pytree is a nested structure of containers whose **leaves** hold values, such as parameters.
    JAX transforms the leaves and keeps the structure. That makes the model's parameter groups
    explicit, and lets us hold the gradient tree up against the parameters it differentiates.
    """),
    md(r"""
    ## 1. Containers, leaves and structure

    A pytree separates its container structure from its leaves. A dictionary with the keys
    `weight` and `bias` is a tree; each array in it is a leaf. A single leaf can hold many numbers,
    so **two leaves do not mean two scalar parameters**.

    JAX transformations understand the common containers: dictionaries, lists and tuples.
    `jax.tree.flatten` returns the leaves as an ordered list together with a *tree definition* that
    can rebuild the original containers (section 8 takes a closer look). Treat that definition as
    part of the contract, instead of guessing where each flattened value belongs.

    Here is the lesson's model. These explicit inputs define the case every later check verifies;
    `loss` reads both parameter leaves. (The same lines, saved as `main.py`, run as a script.)
    """),
    code(r"""
    params = {"weight": jnp.array([1., -1.]), "bias": jnp.array(0.)}
    x = jnp.array([2., 1.])

    def loss(p):
        prediction = jnp.dot(p["weight"], x) + p["bias"]
        return (prediction - 3.) ** 2

    print(describe(params))
    """, id="params"),
    md(r"""
    The last line counts: **2 leaves, 3 numerical parameter values**: `weight` is one leaf that
    holds two numbers. Below is the same tree as a live diagram. Each row is one path; click a leaf
    to select it (the selection is the diagram's `selected_path`, readable from Python).
    """),
    code(r"""
    PytreeDiagram(params)
    """, id="params-diagram"),
    md(r"""
    ## 2. Derive the matching gradient tree

    One example, by hand. Take $x = [2, 1]$, weights $w = [1, -1]$ and bias $b = 0$. The prediction
    is $1$ and the target is $3$, so the residual is $-2$. For the squared loss, the derivative with
    respect to the prediction is $2 \cdot (-2) = -4$. Multiplying by the input gives the weight
    gradient $-4\,[2, 1] = [-8, -4]$; the bias gradient is $-4$ (the prediction depends on the bias
    with slope 1).

    $$
    \begin{aligned}
    \hat y &= 2(1) + 1(-1) + 0 = 1\\
    L &= (1 - 3)^2 = 4\\
    \nabla_w L &= (-8, -4), \qquad \frac{\partial L}{\partial b} = -4
    \end{aligned}
    $$

    With learning rate $0.05$ the new weights are $[1.4, -0.8]$ and the bias becomes $0.2$. The new
    prediction is $2.2$, the residual $-0.8$ and the loss $0.64$. Each of these numbers can be held
    against the gradient tree and the update, which tells us far more than checking only that the
    loss went down.

    **Predict before running:** write down both weight derivatives and the bias derivative, working
    from the residual, before you look at `grads`.
    """),
    code(r"""
    lesson_prediction("gradient_leaves")
    """, id="predict-gradient-leaves"),
    code(r"""
    value, grads = jax.value_and_grad(loss)(params)
    print("loss:", float(value))
    print("grads['weight']:", grads["weight"])
    print("grads['bias']:", grads["bias"])
    """, id="value-and-grad"),
    md(r"""
    `value_and_grad` returned a gradient tree with the same keys as `params`. Leaf by leaf, by path,
    against the hand derivation:
    """),
    code(r"""
    by_hand = {"weight": jnp.array([-8., -4.]), "bias": jnp.array(-4.)}

    for path, computed in jax.tree_util.tree_flatten_with_path(grads)[0]:
        key = path[0].key
        agree = bool(jnp.allclose(computed, by_hand[key]))
        print(f"{jax.tree_util.keystr(path):10} by hand {by_hand[key]!s:10} "
              f"value_and_grad {computed!s:10} agree: {agree}")
    """, id="hand-vs-jax"),
    md(r"""
    The worked-calculation panel below is the same step computed by the lesson's explorer (its
    sliders come in section 4): every row is a number the kernel computed, written next to the
    formula you just used by hand: prediction, residual, loss, $\partial L/\partial \hat y$, each
    gradient leaf, each update and the new loss.
    """),
    code(r"""
    explorer = StepExplorer()  # the lesson's model: x = [2, 1], weight = [1, -1], bias = 0, target 3, lr 0.05
    explorer.calculation
    """, id="worked-calculation"),
    md(r"""
    ## 3. Apply corresponding leaves, not unrelated arrays

    `jax.tree.map` applies $p - \eta g$ to *corresponding* leaves of the parameter tree and the
    gradient tree. For that the containers must agree. A missing key is a **structural** error; an
    incompatible leaf shape is a **numerical contract** error, and a matching structure alone does
    not prove that every leaf has the right shape.

    This is the rest of the lesson's script:
    """),
    code(r"""
    updated = jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)
    print("Before/after:", float(value), float(loss(updated)))
    assert grads.keys() == params.keys()
    assert loss(updated) < value
    record_output("hand-derived update, computed", {"grads": grads, "updated": updated,
                                                     "loss before": float(value), "loss after": float(loss(updated))})
    PytreeDiagram(params, grads=grads, updated=updated)
    """, id="update"),
    md(r"""
    Expected: `Before/after: 4.0` and approximately `0.64`. The lesson's recorded CPU run printed
    `Before/after: 4.0 0.6399999260902405`: JAX computes in float32, where 0.64 has no exact
    representation, so seeing 0.6399999… is correct.

    In the diagram, each row pairs a parameter with its gradient and its updated value *by path*.

    Dictionary leaves are traversed in a deterministic key order: **sorted** keys. `params` was
    written weight-first, but the gradient dictionary JAX returns lists `bias` first. So do not zip
    unrelated dictionaries just because they have the same length:
    """),
    code(r"""
    print("params keys:", list(params))
    print("grads keys: ", list(grads))

    zipped = {key: p - 0.05 * g for key, p, g in zip(params, params.values(), grads.values())}
    for key, value in zipped.items():
        print(f"zip paired by position -> {key}: {value!s}")
    print(diagnose(params, zipped, candidate_name="the zipped update").message)
    """, id="zip-pitfall"),
    md(r"""
    No error was raised: broadcasting quietly turned the bias into two numbers. `jax.tree.map`
    pairs by key through the tree definition, which preserves identity; the shape check above
    (`diagnose`) is the kind of check worth adding at model boundaries.
    """),
    md(r"""
    ## 4. The figure: a gradient tree matches parameter leaves

    **Predict:** Which weight changes more, and why? Type your prediction, then reveal the answer.
    """),
    code(r"""
    lesson_prediction("which_weight_changes_more")
    """, id="predict-which-weight"),
    md(r"""
    The figure is live: every slider move runs `value_and_grad` and `tree.map` in the kernel and
    redraws the bars, the aligned trees and the worked calculation. Click a leaf or a bar to
    select that parameter everywhere.
    """),
    code(r"""
    explorer
    """, id="explorer"),
    md(r"""
    ### Read the figure

    Each pair of bars compares one parameter before and after one gradient step. The categories are
    the two weight coordinates followed by the bias. The weights move from $(1, -1)$ to
    $(1.4, -0.8)$, and the bias moves from $0$ to $0.2$.

    The second weight's bar stays below zero but becomes less negative. All three parameters
    increased: an upward update does not need the parameter itself to be positive.

    ### Connect it to the computation

    For the input $(2, 1)$ the first prediction is $1$, below the target $3$. The parameter
    gradients are $(-8, -4, -4)$. Subtracting them with learning rate $0.05$ adds
    $(0.4, 0.2, 0.2)$, exactly the changes between the paired bars.

    The updated prediction is $2.2$, so the squared error falls from $4$ to $0.64$. The tree
    structure is what lets each gradient reach its own parameter leaf. Note that the chart's
    vertical axis is *parameter value*, not loss: you need the prediction calculation to establish
    that the step improved the model.

    The explorer's last step is `explorer.result` (move the sliders back to the lesson's values to
    see the numbers above):
    """),
    code(r"""
    step = explorer.result
    print("loss before/after:", step.loss, step.loss_after)
    for key in ("weight", "bias"):
        print(f"{key}: grad {step.grads[key]!s}, updated {step.updated[key]!s}")

    # the figure's data, taken from the same step
    visual_data = {
        "kind": "bar", "labels": ["weight[0]", "weight[1]", "bias"], "ylabel": "parameter value",
        "series": [
            {"label": "before", "y": [float(step.params["weight"][0]), float(step.params["weight"][1]),
                                      float(step.params["bias"])]},
            {"label": "after", "y": [float(step.updated["weight"][0]), float(step.updated["weight"][1]),
                                     float(step.updated["bias"])]},
        ],
    }
    for series in visual_data["series"]:
        print(series["label"], [round(v, 4) for v in series["y"]])
    """, id="explorer-result"),
    md(r"""
    ## 5. Experiment: verify every gradient leaf

    You predicted the derivatives in section 2. This check verifies *parameter identity and the
    actual gradient values*, not just a matching container:
    """),
    code(r"""
    assert jnp.allclose(grads["weight"], jnp.array([-8., -4.]))
    assert jnp.allclose(grads["bias"], -4.)
    assert jnp.allclose(updated["weight"], jnp.array([1.4, -0.8]))
    assert jnp.allclose(updated["bias"], 0.2)
    assert jnp.allclose(loss(updated), 0.64, atol=1e-6)
    print("All leaves agree with the hand-derived update.")
    """, id="verify-leaves"),
    md(r"""
    ## 6. Match leaves by meaning as well as shape

    Suppose the parameters hold a dense layer's weight matrix and bias vector. Each gradient leaf
    describes the sensitivity of the loss to *its* parameter leaf. Match the paths, such as
    `layer/weight` and `layer/bias`, before comparing shapes: two leaves of equal shape can still be
    swapped.

    Optimizer state is related to the parameters but need not have exactly their structure: it may
    hold trees of moments plus a scalar step counter or other metadata. A useful diagram aligns the
    matching parameter and gradient paths, and shows the extra optimizer state separately
    (section 7).

    When a tree operation fails, inspect, in this order: **structure, leaf paths, shapes, dtypes**.
    Flattening everything straight away may hide exactly the distinction that explains the error.

    ### Pause and reason

    Two parameter leaves have the same shape. Is swapping their gradients safe?

    <details><summary>Compare your reasoning</summary>

    No. Shape compatibility does not identify which parameter a derivative belongs to. Preserve the
    tree paths, and compare the result with an independently known update.

    </details>

    **See it computed.** Give the model a second weight vector `w_z` for a second input
    $z = [1, 3]$, starting at $[0, 0]$, so the prediction is still $1$ and
    $\partial L/\partial \hat y = -4$. By hand: the gradients are $w_x: [-8, -4]$,
    $w_z: -4\,[1, 3] = [-4, -12]$ and bias $-4$, so the update gives $w_x = [1.4, -0.8]$,
    $w_z = [0.2, 0.6]$ and bias $0.2$. Now swap the gradients of the two equal-shaped leaves:
    """),
    code(r"""
    two = {"w_x": jnp.array([1., -1.]), "w_z": jnp.array([0., 0.]), "bias": jnp.array(0.)}
    z = jnp.array([1., 3.])

    def two_loss(p):
        prediction = jnp.dot(p["w_x"], x) + jnp.dot(p["w_z"], z) + p["bias"]
        return (prediction - 3.) ** 2

    two_grads = jax.grad(two_loss)(two)
    swapped = {"w_x": two_grads["w_z"], "w_z": two_grads["w_x"], "bias": two_grads["bias"]}
    print("diagnose:", diagnose(two, swapped).message)

    right = jax.tree.map(lambda p, g: p - 0.05 * g, two, two_grads)
    wrong = jax.tree.map(lambda p, g: p - 0.05 * g, two, swapped)  # no error is raised
    by_hand = {"w_x": [1.4, -0.8], "w_z": [0.2, 0.6], "bias": 0.2}

    for key in ("w_x", "w_z", "bias"):
        print(f"{key:5} by hand {by_hand[key]!s:11} right grads {right[key]!s:11} "
              f"swapped grads {wrong[key]!s:11} swapped matches the hand update: "
              f"{bool(jnp.allclose(wrong[key], jnp.array(by_hand[key])))}")
    print("loss after the step: right", float(two_loss(right)), "| swapped", float(two_loss(wrong)))
    PytreeDiagram(two, trees={"update with swapped grads": wrong, "update by hand": right})
    """, id="swap-demo"),
    md(r"""
    Nothing structural differs, so `diagnose` and `tree.map` accept the swapped tree. Only the
    comparison with the independently known update exposes it. The loss after the swapped step is
    even *lower* here: checking only that the loss decreased would have let the bug through.
    """),
    md(r"""
    ## 7. Keep metadata separate from differentiated state

    Trainable leaves should be floating-point arrays. A Python string such as a model name is not a
    floating-point parameter. Keep such configuration apart, or register a carefully designed custom
    structure when the model needs one (the instructor notebook shows a registered dataclass whose
    name is metadata, not a leaf).

    A name put inside `params` becomes a leaf. The diagram flags it, and `jax.grad` refuses it:
    """),
    code(r"""
    with_name = {"weight": params["weight"], "bias": params["bias"], "name": "tiny-linear"}
    print(describe(with_name))
    try:
        jax.grad(loss)(with_name)
    except (TypeError, ValueError) as err:
        print(f"\njax.grad refused it: {type(err).__name__}: {err}")
    PytreeDiagram(with_name)
    """, id="metadata"),
    code(r"""
    config = {"name": "tiny-linear"}  # configuration lives beside params, never inside
    grads_apart = jax.grad(loss)(params)
    print(f"model {config['name']!r}: grads['weight'] = {grads_apart['weight']!s}, grads['bias'] = {grads_apart['bias']!s}")
    """, id="metadata-apart"),
    md(r"""
    Optimizer state is another tree with its own meaning, and its structure need not be identical
    to the parameters'. Adam's state holds two moment trees shaped like `params` plus an integer step
    count. Parameters, gradients and optimizer statistics are connected, but they are not
    interchangeable: the diagram keeps the state in its own panel. (This separation matters again in
    the Optax lesson and in recovery.)
    """),
    code(r"""
    try:
        import optax
    except ImportError:  # e.g. the browser kernel: build Adam's state tree by hand instead
        optax = None

    if optax is not None:
        opt_state = optax.adam(0.05).init(params)
        state_name = "optimizer state (optax.adam)"
    else:
        zeros = jax.tree.map(jnp.zeros_like, params)
        opt_state = {"count": jnp.array(0, dtype=jnp.int32), "mu": zeros, "nu": zeros}
        state_name = "optimizer state (Adam's layout, built by hand: optax is not installed here)"

    print(describe(opt_state, state_name))
    PytreeDiagram(params, grads=grads, extra={state_name: opt_state})
    """, id="optimizer-state"),
    md(r"""
    ## 8. Flatten and reconstruct without losing identity

    **Predict before running:** what does the tree definition keep when the array values are
    replaced?
    """),
    code(r"""
    lesson_prediction("treedef_keeps")
    """, id="predict-treedef"),
    code(r"""
    leaves, definition = jax.tree.flatten(params)
    print("leaves:    ", leaves)
    print("definition:", definition)

    rebuilt = jax.tree.unflatten(definition, leaves)
    assert jax.tree.structure(rebuilt) == jax.tree.structure(params)
    assert jnp.array_equal(rebuilt["weight"], params["weight"])
    assert jnp.array_equal(rebuilt["bias"], params["bias"])
    record_output("flatten / unflatten round trip", {"leaves": leaves, "definition": str(definition),
                                                      "rebuilt": rebuilt})
    print("round trip: the original keys and their values are back")
    """, id="flatten"),
    md(r"""
    What the definition keeps: give it *other* leaves and it puts them where the old ones were.
    Position 0 of the leaf list is the bias, because dictionary keys are taken in sorted order.
    """),
    code(r"""
    print(jax.tree.unflatten(definition, ["leaf 0", "leaf 1"]))
    print(jax.tree.unflatten(definition, [jnp.array(10.), jnp.array([20., 30.])]))
    print("leaves the definition expects:", definition.num_leaves)
    """, id="treedef-keeps"),
    md(r"""
    The tree definition describes the containers; the leaves supply the numbers. Both are needed
    to reconstruct the tree.

    ## 9. Make it yours

    Compute the squared norm of **all** gradient leaves (every value of every leaf, squared and
    added up). Verify it by adding the weight and the bias contributions directly.

    *Useful:* `jax.tree.leaves(tree)` lists the leaves; `jnp.sum(a ** 2)` adds the squares of one
    leaf's values; `jnp.allclose(actual, expected)` compares within floating-point tolerance.

    1. Go over every leaf of `grads` and add up the squares: `norm_squared`.
    2. Write the same thing out by leaf name: `manual`.
    """),
    exercise("squared_norm", r"""
    # Make it yours: replace each ... with your code, run this cell, then the check below.
    norm_squared = ...  # TODO: sum over jax.tree.leaves(grads) of jnp.sum(g ** 2)
    manual = ...  # TODO: the weight leaf's squares plus the bias leaf's square, written out
    """),
    code(r"""
    squared_norm_check = CheckButton("squared_norm", "norm_squared")  # click to check again after a change
    if norm_squared is ...:
        print("Not answered yet: replace each ... in the cell above, run it, then run this cell.")
    else:
        print("squared norm over every leaf:", float(norm_squared))
        if manual is not ...:
            print("weight + bias written out:   ", float(manual),
                  "| they agree:", bool(jnp.allclose(norm_squared, manual)))
        print(squared_norm_check.check())
    squared_norm_check
    """, id="check-squared-norm"),
    md(r"""
    ## 10. Extend to a nested model

    Place `weight` and `bias` under a `layer` dictionary and add a scalar `scale` parameter, so the
    model is $s\,(w \cdot x + b)$ with $s = 1$ at the start. Differentiate it and verify the
    derivative with respect to `scale`.

    *Useful:* `jnp.array(1.)` makes a float32 scalar leaf; `jax.grad(f)(tree)` returns the gradient
    tree, with the same structure as `tree`.

    <details><summary>Hint</summary>

    At the starting point the prediction is $1$ and the residual is $-2$, so the derivative with
    respect to `scale` is $2 \cdot (-2) \cdot 1 = -4$.

    </details>
    """),
    exercise("nested_scale_grad", r"""
    # Extend to a nested model: replace each ... with your code.
    nested = ...  # TODO: {"layer": params, "scale": a float32 scalar equal to 1}

    def nested_loss(p):
        pred = ...  # TODO: scale * (weight . x + bias), reading each leaf through its path in p
        return ...  # TODO: the squared error against the target 3

    g = ...  # TODO: the gradient tree of nested_loss at nested
    """),
    code(r"""
    nested_check = CheckButton("nested_scale_grad", "g")
    if g is ...:
        print("Not answered yet: replace each ... in the cell above, run it, then run this cell.")
    else:
        print("same structure as nested:", jax.tree.structure(g) == jax.tree.structure(nested))
        if isinstance(g, dict) and "scale" in g:
            print("d loss / d scale:", float(g["scale"]))
            record_output("nested-scale derivative", g)
        print(nested_check.check())
    nested_check
    """, id="check-nested"),
    md(r"""
    Nested parameter identity survives differentiation: `g` has the `layer` dictionary and the
    `scale` leaf in the same places as `nested`. The independent calculation of the scale
    derivative checks the new path.

    ## 11. Repair a mismatched update tree

    Remove `bias` from the gradient dictionary and reproduce the structural error; then restore it
    and verify the hand-derived update. (Hint: matching leaf counts is not enough; key paths
    matter.)

    First the failure, with JAX's own message and the diagnosis of the two trees:
    """),
    code(r"""
    broken = {"weight": grads["weight"]}  # bias removed from the gradient tree
    try:
        jax.tree.map(lambda p, g: p - 0.05 * g, params, broken)
    except ValueError as err:
        print("Expected tree mismatch")
        print(f"ValueError: {err}\n")
    else:
        raise AssertionError("Expected a missing-key failure")

    print("diagnose:", diagnose(params, broken).message)
    PytreeDiagram(params, grads=broken)
    """, id="repair-error"),
    md(r"""
    Now the repair: the update with a gradient tree that has every parameter's path again.
    """),
    exercise("repair_update", r"""
    # Repair: replace ... with the update computed from a complete gradient tree.
    fixed = ...  # TODO: jax.tree.map(lambda p, g: ..., params, <a gradient tree with weight AND bias>)
    """),
    code(r"""
    repair_check = CheckButton("repair_update", "fixed")
    if fixed is ...:
        print("Not answered yet: replace the ... in the cell above, run it, then run this cell.")
    else:
        result = repair_check.check()
        print(result)
        if result.passed:
            print("loss(fixed):", float(loss(fixed)))
            assert jnp.allclose(loss(fixed), 0.64, atol=1e-6)
            record_output("missing-key repair", {"fixed": fixed, "loss": float(loss(fixed))})
    repair_check
    """, id="check-repair"),
    md(r"""
    ## 12. Check your understanding

    What structure does `grad(loss)(params)` have? Choose in the widget; it then explains the
    answer.
    """),
    code(r"""
    quiz = grad_structure_quiz()
    quiz
    """, id="quiz", tags=("exercise:quiz",)),
    md(r"""
    ## 13. Diagnose the result

    A missing bias gradient is a **tree mismatch**. Broadcasting the weights or changing the
    learning rate cannot supply the missing parameter identity. Both, computed:
    """),
    code(r"""
    for lr in (0.05, 0.01):
        try:
            jax.tree.map(lambda p, g: p - lr * g, params, broken)
        except ValueError:
            print(f"learning rate {lr}: still a ValueError, ['bias'] has no gradient")

    patched = {"weight": grads["weight"], "bias": grads["weight"]}  # the weight gradient broadcast into bias
    bad = jax.tree.map(lambda p, g: p - 0.05 * g, params, patched)
    print("broadcast patch, no error, but:", diagnose(params, bad, candidate_name="the updated tree").message)
    """, id="diagnose-result"),
    md(r"""
    ## Carry forward

    - Checking the gradient leaves against a hand derivation verifies parameter identity and the
      actual values, not just a matching container.
    - The tree definition describes the containers; the leaves supply the numbers. Both are needed
      for reconstruction.

    ## Keep your evidence

    Keep the parameter/gradient tree diagram, the hand-derived leaves and update, the flatten /
    unflatten round trip, the nested-scale derivative and the missing-key repair. The cell below
    writes what this notebook recorded along the way (your predictions, check results, quiz answer
    and key outputs) to `pytree-lesson-evidence.md` and `.json` beside this notebook. Add your
    modified code and your reasoning to your engineering portfolio.
    """),
    code(r"""
    record_output("parameter and gradient tree diagram", PytreeDiagram(params, grads=grads, updated=updated).text())
    saved = save_evidence("pytree-lesson-evidence.md")
    print("saved", saved.markdown.name, "and", saved.json.name)
    EvidenceButton("pytree-lesson-evidence.md")  # saves again after you change something
    """, id="evidence"),
    md(r"""
    ## Primary references

    - [JAX pytrees](https://docs.jax.dev/en/latest/101/pytrees.html)
    """),
]


# =========================================================================== 02: packed parameters

PACKED = [
    md(r"""
    # Gradient of packed parameters

    **Keep gradients aligned with parameters.** A model can store its parameters in a dictionary
    instead of one long array. JAX calls nested containers of arrays *pytrees*. Differentiating a
    scalar loss with respect to a parameter dictionary returns a dictionary with the same keys and a
    gradient array for each parameter array. This exercise then asks for the opposite layout: every
    parameter packed into **one** array.

    Run the cells from top to bottom; the first one sets things up. In the browser version of the
    course, `import jax` is pytree-lab's Lite engine (numpy + autograd), because JAX itself cannot be
    installed in WebAssembly; the next cell says which engine computes.
    """),
    code(r"""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.flatten_util import ravel_pytree

    from pytree_lab import CheckButton, PytreeDiagram, describe, get_engine, save_evidence

    print("computing with", get_engine().name)
    """, id="imports"),
    md(r"""
    ## A dictionary of parameters

    Two weights and a bias, one example with two features:
    """),
    code(r"""
    params = {"w": jnp.array([1.0, 2.0]), "b": jnp.array([0.5])}
    x = jnp.array([[1.0, -1.0]])

    def loss(p, x):
        prediction = x @ p["w"] + p["b"]
        return jnp.sum(prediction ** 2)

    print("prediction:", (x @ params["w"] + params["b"]).tolist())
    print("loss:", float(loss(params, x)))
    grads = jax.grad(loss)(params, x)
    print("grads['w']:", grads["w"].tolist())
    print("grads['b']:", grads["b"].tolist())
    PytreeDiagram(params, grads=grads)
    """, id="dict-example"),
    md(r"""
    The prediction is $1 \cdot 1 + 2 \cdot (-1) + 0.5 = -0.5$. Squaring it gives a loss of $0.25$.
    The derivative of the loss with respect to the prediction is $2 \cdot (-0.5) = -1$, which is
    multiplied by each input feature, $(1, -1)$, to give the weight gradients $[-1, 1]$. The bias
    enters the prediction with slope 1, so its gradient is $-1$ as well. The gradient dictionary has
    the keys of `params`, each leaf with its parameter's shape.

    ## One array is a one-leaf pytree

    A single array is itself a pytree with exactly one leaf. Its gradient is an array of the same
    shape, with no tuple or dictionary around it. The task below uses that simpler representation:
    the weights followed by the bias in one array. It does not ask you to flatten a nested
    dictionary.
    """),
    code(r"""
    flat_params = jnp.array([1.0, 2.0, 0.5])  # w[0], w[1], then b: the same model, packed
    print(describe(flat_params, "flat_params"))

    def packed_loss(flat, x):
        weights, bias = flat[:-1], flat[-1]  # the slices live inside the loss
        return jnp.sum((x @ weights + bias) ** 2)

    flat_grad = jax.grad(packed_loss)(flat_params, x)
    print("gradient:", flat_grad.tolist(), "| type:", type(flat_grad).__name__, "| shape:", flat_grad.shape)
    """, id="one-leaf"),
    md(r"""
    The same three numbers as the dictionary's gradient, $[-1, 1]$ and $[-1]$, now in one array in
    the order the loss reads them.

    ## Differentiate the parameter argument

    `argnums=0` selects the first positional argument, whether that argument is an array or a
    nested container. Keep the data argument fixed. Write the parameter slices *inside* the loss, so
    JAX can follow how the loss depends on the array being differentiated. Selecting the wrong
    argument gives a gradient of the data's shape instead:
    """),
    code(r"""
    print("argnums=0 (flat_params):", jax.grad(packed_loss, argnums=0)(flat_params, x).tolist())
    print("argnums=1 (x, the data): ", jax.grad(packed_loss, argnums=1)(flat_params, x).tolist())
    """, id="argnums"),
    md(r"""
    ## Where each packed position comes from

    `jax.flatten_util.ravel_pytree` packs any pytree into one vector and returns the function that
    unpacks it. The view below links each position of the packed vector to the tree path it came
    from: click a position to select its leaf in the diagram, or click a leaf to see its positions.
    The diagram's second column is the tree of positions, obtained by unpacking `0, 1, 2, …`.

    Note the order: a dictionary is flattened with its keys **sorted**, so `b` comes before `w`.
    That is not the exercise's layout (weights first, bias last). The order of a packed vector is a
    contract; a tuple `(w, b)` packs in the order written.
    """),
    code(r"""
    from pytree_lab import PackedView

    view = PackedView(params)  # buttons for the packed positions, linked to the diagram
    print("packed:", view.packed.tolist())
    for position in sorted(view.owner):
        print(f"  packed[{position}] <- {view.label(position)}")
    view
    """, id="packed-view"),
    code(r"""
    as_tuple, _ = ravel_pytree((params["w"], params["b"]))
    print("a tuple (w, b) packs as", as_tuple.tolist(), "(weights first, bias last: the exercise's layout)")
    """, id="packed-tuple"),
    md(r"""
    ## The task

    Implement `grad_over_flat_params(flat_params, x)` with `jax.grad`. Both inputs are real
    floating-point JAX arrays:

    - `flat_params` has shape `(d + 1,)`: the first `d` entries are the weights, the last is the bias;
    - `x` has shape `(N, d)`.

    Compute the predictions `x @ weights + bias` and a scalar loss equal to the **sum** of their
    squares. There are no target labels in this exercise. Return the gradient with respect to
    `flat_params`, in the same order and with shape `(d + 1,)`. Use a sum, not a mean.

    **Worked example.** For `flat_params = [1.0, 0.0, 0.0]` and `x = [[2.0, 3.0]]`, the prediction
    is $2$. The derivative of $2^2$ with respect to the prediction is $2 \cdot 2 = 4$, so the two weight
    gradients are $2 \cdot 2 \cdot 2 = 8$ and $2 \cdot 2 \cdot 3 = 12$, and the bias gradient is
    $2 \cdot 2 = 4$: return `[8.0, 12.0, 4.0]`.

    The check runs your function on this example and on hidden cases of other sizes (several `N` and
    `d`, random values).
    """),
    exercise("grad_over_flat_params", r"""
    def grad_over_flat_params(flat_params, x):
        # TODO: define loss(flat) that reads weights = flat[:-1] and bias = flat[-1] inside it,
        #       computes predictions x @ weights + bias and returns the SUM of their squares;
        # TODO: return the gradient of that loss with respect to flat_params (jax.grad, argnums=0).
        ...
    """),
    code(r"""
    example = grad_over_flat_params(jnp.array([1.0, 0.0, 0.0]), jnp.array([[2.0, 3.0]]))
    if example is None:
        print("Not answered yet: grad_over_flat_params returns nothing so far.")
    else:
        print("worked example:", np.asarray(example).tolist(), "(by hand: [8.0, 12.0, 4.0])")
    """, id="worked-example"),
    code(r"""
    flat_check = CheckButton("grad_over_flat_params", "grad_over_flat_params")  # click after a change
    if example is None:
        print("Not answered yet: write grad_over_flat_params above, run it and the worked example, then this cell.")
    else:
        print(flat_check.check())
    flat_check
    """, id="check-flat"),
    md(r"""
    The packed gradient and the dictionary gradient are the same numbers in different containers.
    Unpacking with the tuple layout puts them back by name:
    """),
    code(r"""
    packed_grad = grad_over_flat_params(jnp.array([1.0, 2.0, 0.5]), x)
    if packed_grad is None:
        print("Not answered yet.")
    else:
        _, unravel_wb = ravel_pytree((params["w"], params["b"]))
        w_grad, b_grad = unravel_wb(jnp.asarray(packed_grad))
        print("from the packed gradient: w", w_grad.tolist(), "b", b_grad.tolist())
        print("from the dictionary:      w", grads["w"].tolist(), "b", grads["b"].tolist())
    """, id="packed-vs-dict"),
    md(r"""
    ## Keep your evidence
    """),
    code(r"""
    saved = save_evidence("packed-parameters-evidence.md")
    print("saved", saved.markdown.name, "and", saved.json.name)
    """, id="evidence"),
]


# =========================================================================== 03: instructor demo

INSTRUCTOR = [
    md(r"""
    # Instructor notebook: build a demo with your own loss and pytree

    The lesson's figure is a `StepExplorer` with its defaults. The same widget takes **your** model:
    any `loss_fn(params, **inputs)` returning a scalar, any pytree of float parameters (nested
    dictionaries, lists, registered dataclasses) and a dictionary of inputs. Every slider move runs
    one compiled `jax.value_and_grad` + `jax.tree.map` step in the kernel and redraws the aligned
    trees, the before/after bars and the worked calculation.

    This notebook is for a live kernel (JupyterLab with JAX installed). It also runs in the
    browser build, where `import jax` is pytree-lab's Lite engine and optax is not available.
    """),
    code(r"""
    import dataclasses

    import jax
    import jax.numpy as jnp

    from pytree_lab import PytreeDiagram, StepExplorer, describe, diagnose, get_engine

    print("computing with", get_engine().name)
    """, id="imports"),
    md(r"""
    ## 1. The lesson's explorer and what you can read from it

    `ex.sliders` maps each label to its `FloatSlider` (inputs, then `learning_rate`, then one per
    parameter value). `ex.result` is the last step (`.params`, `.loss`, `.grads`, `.updated`,
    `.loss_after`); `ex.selected_path` is the path selected in the page (a `keystr`, `""` for
    none), and you can set it from Python.
    """),
    code(r"""
    ex = StepExplorer()
    print("sliders:", list(ex.sliders))
    print("loss", ex.result.loss, "->", ex.result.loss_after)
    ex
    """, id="default-explorer"),
    code(r"""
    ex.sliders["learning_rate"].value = 0.1  # as if the slider moved
    print(f"lr 0.1: updated weight {ex.result.updated['weight']!s}, loss after {ex.result.loss_after:.4g}")
    ex.sliders["learning_rate"].value = 0.05

    ex.selected_path = "['bias']"  # selects the bias row, its bars and its calculation rows
    print("selected:", ex.selected_path)
    """, id="drive-explorer"),
    md(r"""
    React to the student's clicks and moves with `observe`:
    """),
    code(r"""
    def announce(change):
        print("selected", change["new"] or "nothing")

    ex.observe(announce, "selected_path")
    ex.selected_path = "['weight']"
    ex.unobserve(announce, "selected_path")
    """, id="observe"),
    md(r"""
    ## 2. Your own loss: nested dictionaries and lists

    A two-layer model whose hidden units are a **list** of dictionaries, inside a nested
    dictionary. Inputs become sliders too; a key named `target` is treated as the target. Give
    `prediction_fn(params, **inputs_without_target)` to add the prediction, residual and
    $\partial L/\partial \hat y$ rows to the worked calculation.
    """),
    code(r"""
    mlp = {
        "hidden": [
            {"w": jnp.array([0.5, -0.3]), "b": jnp.array(0.1)},
            {"w": jnp.array([-0.2, 0.8]), "b": jnp.array(0.0)},
        ],
        "out": {"w": jnp.array([1.0, -1.0]), "b": jnp.array(0.2)},
    }

    def mlp_predict(p, x):
        h = jnp.stack([jnp.tanh(jnp.dot(unit["w"], x) + unit["b"]) for unit in p["hidden"]])
        return jnp.dot(p["out"]["w"], h) + p["out"]["b"]

    def mlp_loss(p, x, target):
        return (mlp_predict(p, x) - target) ** 2

    print(describe(mlp, "mlp"))
    mlp_ex = StepExplorer(mlp_loss, mlp, {"x": jnp.array([1.0, 2.0]), "target": jnp.array(1.0)},
                          learning_rate=0.1, prediction_fn=mlp_predict)
    mlp_ex
    """, id="mlp"),
    code(r"""
    r = mlp_ex.result
    print("loss", r.loss, "->", r.loss_after)
    print(f"grad of the second hidden unit's w: {r.grads['hidden'][1]['w']!s}")
    print("paths:", [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(r.grads)[0]])
    """, id="mlp-result"),
    md(r"""
    ## 3. A registered dataclass, with metadata kept out of the leaves

    `jax.tree_util.register_dataclass` makes a dataclass a pytree node. Fields listed in
    `data_fields` are leaves (differentiated); fields in `meta_fields` are part of the tree
    *definition*, so a layer's name travels with the structure without ever becoming a parameter.
    Paths of dataclass fields read `.weight`, `.bias`.
    """),
    code(r"""
    @dataclasses.dataclass
    class Dense:
        weight: jax.Array
        bias: jax.Array
        name: str = "dense"

    jax.tree_util.register_dataclass(Dense, data_fields=["weight", "bias"], meta_fields=["name"])

    model = {"encoder": Dense(jnp.array([1.0, -1.0]), jnp.array(0.0), name="encoder"), "scale": jnp.array(1.0)}

    def model_loss(p, x, target):
        return (p["scale"] * (jnp.dot(p["encoder"].weight, x) + p["encoder"].bias) - target) ** 2

    print(describe(model, "model"))
    print("definition:", jax.tree.structure(model))
    model_ex = StepExplorer(model_loss, model, {"x": jnp.array([2.0, 1.0]), "target": jnp.array(3.0)})
    print("d loss / d scale:", float(model_ex.result.grads["scale"]))
    model_ex
    """, id="dataclass"),
    md(r"""
    The lesson's nested exercise in another container: at the lesson's values the scale derivative
    is again $-4$, and the encoder's gradient is the lesson's $[-8, -4]$ and $-4$.

    ## 4. Optimizer state in the side panel

    `PytreeDiagram(..., extra={title: tree})` draws any extra tree (such as optax's Adam state: a
    step count and two moment trees) in its own panel beside the aligned columns. The explorer's
    diagram is `ex.diagram`: observe `result` to refresh the panel after every step. Here the panel
    shows Adam's state after one `tx.update` with the explorer's current gradients.
    """),
    code(r"""
    try:
        import optax
    except ImportError:  # the browser kernel: no optax
        optax = None

    if optax is None:
        print("optax is not installed in this kernel; the side panel needs it.")
    else:
        tx = optax.adam(0.05)
        as_written = {"weight": 0.0, "bias": 0.0}  # rows follow the lesson's order, not JAX's sorted keys

        def show_adam_state(change):
            step = change["new"]
            state = tx.init(step.params)
            _, state = tx.update(step.grads, state, step.params)
            ex.diagram.set_trees({"params": step.params, "grads": step.grads, "updated": step.updated},
                                 extra={"Adam state after one update": state},
                                 order=as_written)

        ex.observe(show_adam_state, "result")
        show_adam_state({"new": ex.result})
        print("side panels:", [panel["title"] for panel in ex.diagram.panels])
    ex
    """, id="optax-panel"),
    md(r"""
    ## 5. The diagram on its own

    `PytreeDiagram` takes any trees. Use it to show a mismatch before it becomes an error in
    class: rows are aligned by path, and a missing or misshapen leaf is marked. `diagnose` says the
    same in one sentence, in the order the lesson teaches: structure, paths, shapes, dtypes.
    """),
    code(r"""
    params = {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}
    wrong_shape = {"weight": jnp.array([-8.0, -4.0]), "bias": jnp.array([-4.0, -4.0])}
    print(diagnose(params, wrong_shape).message)
    d = PytreeDiagram(params, grads=wrong_shape)
    d.selected_path = "['bias']"
    d
    """, id="diagram-alone"),
    md(r"""
    ## Tips for a demo that works the first time

    - Keep parameters as float arrays (`jnp.array(0.)`, not `0`): integer or string leaves are not
      differentiable, and the explorer says so instead of computing.
    - Every float value becomes a slider, up to `max_sliders=24`; a larger model still computes
      and draws its trees, with sliders for the first values only.
    - A loss that fails for some slider values shows its error in the widget; the last good step
      stays on screen.
    """),
]


NOTEBOOKS = {
    "01_pytrees.ipynb": (PYTREES, "pytrees"),
    "02_packed_parameters.ipynb": (PACKED, "packed"),
    "03_instructor_demo.ipynb": (INSTRUCTOR, "instructor"),
}


def render(name: str) -> str:
    cells, stem = NOTEBOOKS[name]
    return nbformat.writes(build(cells, stem)) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report notebooks that differ from this script")
    args = parser.parse_args(argv)
    stale = []
    for name in NOTEBOOKS:
        path = HERE / name
        text = render(name)
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
            print("wrote", path.relative_to(ROOT))
    if stale:
        print("out of date (run content/_build_notebooks.py):", ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
