"""Section 1: one update of the lesson's model, jitted `CompiledStep` vs eager `gradient_step`.

Also the explorer's whole kernel-side update (`StepExplorer.recompute`: gather the sliders,
the compiled step, the checks, then the diagram rows, bars and worked calculation), since
that is what a slider move costs in Python.
"""

from __future__ import annotations

import time

from .stats import Table, fmt, summary


def _timed(fn, n: int) -> tuple[float, list[float]]:
    """Seconds of the first call, then microseconds of `n` more."""
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    return first, out


def run(n_eager: int = 300, n_jit: int = 3000, n_explorer: int = 300) -> dict:
    import jax
    import jax.numpy as jnp

    from pytree_lab import gradient_step, lesson
    from pytree_lab.step import pin_dtypes
    from pytree_lab.training import CompiledStep

    # Start the backend first, so neither first call below pays for it.
    jnp.zeros(1).block_until_ready()
    params, inputs = lesson.lesson_params(), lesson.lesson_inputs()

    def eager():
        return gradient_step(lesson.lesson_loss, params, **inputs, learning_rate=lesson.LEARNING_RATE)

    step = CompiledStep(lesson.lesson_loss)
    pparams, pinputs = pin_dtypes(params), pin_dtypes(inputs)

    def jitted():
        return step(pparams, pinputs, lesson.LEARNING_RATE)

    eager_first, eager_us = _timed(eager, n_eager)
    jit_first, jit_us = _timed(jitted, n_jit)
    # the two agree (a fast wrong answer is no result)
    a, b = eager(), jitted()
    agree = abs(a.loss - b.loss) < 1e-5 and all(
        abs(float(x) - float(y)) < 1e-5
        for x, y in zip(jax.tree.leaves(a.updated), jax.tree.leaves(b.updated))
        for x, y in zip(jnp.ravel(x), jnp.ravel(y))
    )
    traces_before = step.traces
    _timed(jitted, 50)
    retraced = step.traces != traces_before

    from pytree_lab import StepExplorer

    t0 = time.perf_counter()
    ex = StepExplorer()
    explorer_init = time.perf_counter() - t0
    slider = ex.sliders["x[0]"]
    # every value differs from the one before (an equal value would not notify)
    values = iter([2.01 + 0.01 * (i % 100) for i in range(n_explorer + 1)])

    def move():
        # a trait change runs the explorer's observer, exactly as a message from the page would
        slider.value = next(values)

    explorer_first, explorer_us = _timed(move, n_explorer)
    explorer_traces = ex.session.slider_step.traces

    return {
        "eager": {"first_s": eager_first, **summary(eager_us)},
        "jit": {"first_s": jit_first, **summary(jit_us)},
        "explorer_update": {
            "init_s": explorer_init,
            "first_s": explorer_first,
            **summary(explorer_us),
            "traces": explorer_traces,
        },
        "agree": agree,
        "retraced_on_new_values": retraced,
        "speedup_median": summary(eager_us)["median"] / summary(jit_us)["median"],
    }


def table(r: dict) -> Table:
    t = Table(
        "1. Compute per update — the lesson's model (value_and_grad + tree.map), in this process",
        ["what", "median", "p95", "first call", "target", "ok/MISSED"],
    )
    e, j, x = r["eager"], r["jit"], r["explorer_update"]
    t.add("eager gradient_step", fmt(e["median"], " µs"), fmt(e["p95"], " µs"), fmt(e["first_s"] * 1e3, " ms"), "", "")
    t.add(
        "jitted CompiledStep",
        fmt(j["median"], " µs"),
        fmt(j["p95"], " µs"),
        fmt(j["first_s"] * 1e3, " ms"),
        "< eager",
        "ok" if j["median"] < e["median"] else "MISSED",
    )
    t.add(
        "explorer update (step + views' state)",
        fmt(x["median"], " µs"),
        fmt(x["p95"], " µs"),
        fmt(x["first_s"] * 1e3, " ms"),
        "",
        "",
    )
    t.notes.append(
        f"jit is {r['speedup_median']:.0f}x faster than eager (median); results agree: "
        f"{'yes' if r['agree'] else 'NO'}; retraced on new values: {'YES' if r['retraced_on_new_values'] else 'no'}; "
        f"explorer traces after {x['n'] + 1} moves: {x['traces']}"
    )
    t.notes.append(f"StepExplorer() construction (incl. first compile): {x['init_s'] * 1e3:.0f} ms")
    return t
