"""The lesson's predictions (each revealed only after the student typed one) and its quiz."""

from __future__ import annotations

from collections.abc import Callable

from .. import lesson
from ..exercises import Evidence, PredictionPrompt, Quiz, fmt, fmt_num, tools
from .exercises.common import lesson_point

# Each question: id -> (question, choices, right index, explanation, why each wrong choice is wrong)
QUIZ: dict[str, tuple[str, list[str], int, str, dict[int, str]]] = {
    "grad_structure": (
        "What structure does grad(loss)(params) have?",
        [
            "One scalar regardless of parameters",
            "A pytree corresponding to params",
            "A list of Python source lines",
            "A flat list of every gradient value, sorted",
        ],
        1,
        "The differentiated input determines the gradient structure. Each floating-point parameter "
        "leaf gets a corresponding gradient leaf.",
        {
            0: "the loss is one scalar, but its gradient has one entry per parameter value: here "
            "{'weight': [-8, -4], 'bias': -4}, three values in two leaves.",
            2: "grad works on numbers, not on source code; it returns arrays.",
            3: "a flat list would lose which value belongs to which parameter (and sorting would scramble "
            "them); grad keeps params' containers and keys.",
        },
    ),
    "leaves_vs_values": (
        "params = {'weight': jnp.array([1., -1.]), 'bias': jnp.array(0.)}. "
        "How many leaves and how many numerical parameter values?",
        ["2 leaves, 3 values", "3 leaves, 3 values", "2 leaves, 2 values", "1 leaf, 3 values"],
        0,
        "Each array is one leaf, and a leaf can hold many values: weight holds 2, bias holds 1.",
        {
            1: "a leaf is a whole array, not each of its numbers: weight is one leaf with two values.",
            2: "the bias is a scalar array, one value; weight has two: 3 values in all.",
            3: "the dict is a container, not a leaf; its two arrays are the leaves.",
        },
    ),
    "swap_same_shape": (
        "Two parameter leaves have the same shape. Is it safe to swap their gradients?",
        [
            "Yes: the shapes match, so tree.map accepts it",
            "No: shape does not say which parameter a derivative belongs to",
            "Only if the leaves are scalars",
            "Only if the optimizer is Adam",
        ],
        1,
        "Match by path (meaning), then check shapes. Swapped equal-shaped gradients run without an error "
        "and give a wrong update.",
        {
            0: "tree.map accepting it is exactly the danger: nothing fails, the update is just wrong.",
            2: "scalar leaves have equal shapes too; shape never identifies the parameter.",
            3: "no optimizer can tell swapped gradients apart; they are wrong for every optimizer.",
        },
    ),
    "optimizer_count": (
        "optax.adam's state holds mu, nu and an int count. Which of these is a trainable parameter?",
        [
            "count, because it is a leaf of the state",
            "mu and nu, because they have params' shapes",
            "None of them: they are optimizer statistics, not parameters",
            "All three",
        ],
        2,
        "Optimizer state is a separate tree: moment estimates (mu, nu) shaped like params, and a step "
        "counter. None of it is differentiated or updated by the gradient step.",
        {
            0: "count is an int step counter (metadata); you never differentiate it.",
            1: "mu and nu share params' shapes because they track each parameter's gradients, but they "
            "are running averages of gradients, not parameter values.",
            3: "none is a parameter; the parameters live in params.",
        },
    ),
    "metadata_leaf": (
        "You put a model name 'tiny' into params and call jax.grad(loss)(params). What happens?",
        [
            "JAX skips the string",
            "jax.grad raises: a string leaf cannot be differentiated",
            "The name's gradient is 0",
            "The name is converted to a number",
        ],
        1,
        "Every leaf of the differentiated tree must be a float array. Keep names and other configuration "
        "outside the tree you differentiate.",
        {
            0: "JAX does not skip leaves; a str leaf is an error (or, registered as a node, no leaf at all).",
            2: "only float leaves get gradients; a string has none, not a zero.",
            3: "JAX never converts text to numbers.",
        },
    ),
    # the packed-parameters lesson's question (02): the order ravel_pytree packs a dict in
    "ravel_order": (
        "ravel_pytree({'w': jnp.array([1., 2.]), 'b': jnp.array([0.5])}) packs which vector?",
        [
            "[1, 2, 0.5]: the keys in the order written",
            "[0.5, 1, 2]: the keys in sorted order",
            "[1, 0.5, 2]: the values interleaved",
            "[[1, 2], [0.5]]: one row per leaf",
        ],
        1,
        "A dict is flattened with its keys sorted, so 'b' comes before 'w'. The packed order is a contract: "
        "unpack with the function ravel_pytree returned, or pack a tuple (w, b) to get weights first.",
        {
            0: "dicts are flattened in sorted key order, not in the order written: 'b' < 'w'.",
            2: "each leaf's values stay together, in the leaf's own order; leaves are never interleaved.",
            3: "ravel_pytree returns one flat 1-D array, not a nested list.",
        },
    ),
}


def quiz(question_id: str = "grad_structure", *, evidence: Evidence | None = None) -> Quiz:
    """One of the lesson's "Check your understanding" questions (ids: see QUIZ)."""
    if question_id not in QUIZ:
        raise ValueError(f"unknown question {question_id!r}; the questions are: {', '.join(QUIZ)}")
    question, choices, answer, explanation, why_not = QUIZ[question_id]
    return Quiz(question, choices, answer, explanation, why_not=why_not, quiz_id=question_id, evidence=evidence)


grad_structure_quiz = quiz  # the lesson's first "Check your understanding" question: quiz()'s default


def _reveal_which_weight() -> str:
    point = lesson_point()
    change = [float(u - p) for u, p in zip(point["updated"]["weight"], point["params"]["weight"])]
    g = [float(v) for v in point["grads"]["weight"]]
    bigger = 0 if abs(change[0]) >= abs(change[1]) else 1
    return (
        f"weight[{bigger}] changes more: weight[0] moves by {fmt_num(change[0])} and weight[1] by "
        f"{fmt_num(change[1])}. Their gradients are {fmt_num(g[0])} and {fmt_num(g[1])}: the same "
        f"derivative of the loss with respect to the prediction, times each weight's input "
        f"x = {fmt(lesson.lesson_inputs()['x'])}. The larger input gives the larger gradient, so the larger step."
    )


def _reveal_gradient_leaves() -> str:
    grads = lesson_point()["grads"]
    return (
        f"grads['weight'] = {fmt(grads['weight'])} and grads['bias'] = {fmt(grads['bias'])}: "
        "the derivative with respect to the prediction times each input, and times 1 for the bias."
    )


def _reveal_treedef() -> str:
    jax = tools.jax
    params = lesson.lesson_params()
    leaves, treedef = jax.tree.flatten(params)
    rebuilt = jax.tree.unflatten(treedef, [leaf * 0 for leaf in leaves])
    keys = ", ".join(repr(k) for k in rebuilt)
    return (
        f"The tree definition keeps the containers and their keys: {treedef}. Replacing the "
        f"{len(leaves)} leaves with new arrays and unflattening gives back a dict with keys {keys} "
        "in the same places; the values come only from the new leaves."
    )


def _reveal_argnums_shape() -> str:
    jax, jnp = tools.jax, tools.jnp
    flat, x = jnp.array([1.0, 2.0, 0.5]), jnp.array([[1.0, -1.0]])

    def packed_loss(f, x):
        return jnp.sum((x @ f[:-1] + f[-1]) ** 2)

    by_params = jax.grad(packed_loss, argnums=0)(flat, x)
    by_data = jax.grad(packed_loss, argnums=1)(flat, x)
    return (
        f"argnums=0 gives shape {tuple(by_params.shape)} ({fmt(by_params)}), flat_params' shape; argnums=1 "
        f"gives shape {tuple(by_data.shape)} ({fmt(by_data)}), the shape of x: a gradient always has the "
        "shape of the argument it is taken with respect to."
    )


PREDICTIONS: dict[str, tuple[str, Callable[[], str]]] = {
    "argnums_shape": (
        "With argnums=1 the gradient is taken with respect to x instead of flat_params. What shape "
        "will it have, and what shape does argnums=0 give?",
        _reveal_argnums_shape,
    ),
    "which_weight_changes_more": ("Which weight changes more, and why?", _reveal_which_weight),
    "gradient_leaves": (
        "Predict both weight derivatives and the bias derivative from the residual before inspecting grads.",
        _reveal_gradient_leaves,
    ),
    "treedef_keeps": ("What is retained by the tree definition when array values are replaced?", _reveal_treedef),
}


def lesson_prediction(prediction_id: str, *, evidence: Evidence | None = None) -> PredictionPrompt:
    """One of the lesson's "Predict" prompts, with its answer computed when revealed."""
    if prediction_id not in PREDICTIONS:
        raise ValueError(f"unknown prediction {prediction_id!r}; the prompts are: {', '.join(PREDICTIONS)}")
    prompt, reveal = PREDICTIONS[prediction_id]
    return PredictionPrompt(prompt, reveal, prediction_id=prediction_id, evidence=evidence)
