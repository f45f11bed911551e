"""Section 6: 100 training steps, `TrainingStep.run` beside hand-written jitted optax loops.

Two models: the lesson's (three parameters) and a 1k-parameter MLP (16 -> 48 -> 4, tanh, batch
of 64). Two optimizers: plain SGD (``optimizer=None``) and ``optax.adam``. References written as
a careful person would: (a) one jitted step called 100 times from Python, the tutorial loop;
(b) one jitted `lax.scan` over 100 steps, the fastest way there is. Target: `run(n=100)` within
2x of the faster of the two. The batch is an argument of every loop, as in real training (a batch
closed over as a constant is compiled into the program). Each time is a median over repeats, after
a first (compiling) call; every loop starts from the same numpy params and returns the losses.
"""

from __future__ import annotations

import time

from .stats import Table, fmt, summary, verdict

TARGET_RATIO = 2.0
STEPS = 100


def _interleaved(fns: dict, repeats: int) -> dict:
    """Median ms of each function, timed in turn (a, b, c, a, b, c, ...) so a busy moment of the
    machine falls on all of them alike; after one first (compiling) call each."""
    for fn in fns.values():
        fn()
    times: dict = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t0) * 1e3)
    return {name: summary(v) for name, v in times.items()}


def _models():
    import jax.numpy as jnp
    import numpy as np

    from pytree_lab import lesson

    rng = np.random.default_rng(0)
    mlp_params = {
        "hidden": {"w": (rng.normal(size=(16, 48)) / 4).astype(np.float32), "b": np.zeros(48, np.float32)},
        "out": {"w": (rng.normal(size=(48, 4)) / 7).astype(np.float32), "b": np.zeros(4, np.float32)},
    }
    mlp_inputs = {
        "x": rng.normal(size=(64, 16)).astype(np.float32),
        "target": rng.normal(size=(64, 4)).astype(np.float32),
    }

    def mlp_loss(p, x, target):
        h = jnp.tanh(x @ p["hidden"]["w"] + p["hidden"]["b"])
        y = h @ p["out"]["w"] + p["out"]["b"]
        return jnp.mean((y - target) ** 2)

    lesson_params = {"weight": np.array([1.0, -1.0], np.float32), "bias": np.array(0.0, np.float32)}
    lesson_inputs = {"x": np.array([2.0, 1.0], np.float32), "target": np.array(3.0, np.float32)}
    return {
        "lesson model (3 params)": (lesson.lesson_loss, lesson_params, lesson_inputs),
        "MLP 16-48-4 (1,012 params)": (mlp_loss, mlp_params, mlp_inputs),
    }


def run(repeats: int = 60) -> dict:
    import jax
    import numpy as np
    import optax

    from pytree_lab.training import TrainingStep

    jax.numpy.zeros(1).block_until_ready()
    results: dict = {}
    for model, (loss, params, inputs) in _models().items():
        n_params = sum(int(np.size(x)) for x in jax.tree.leaves(params))
        for opt_name, opt in (("sgd (optimizer=None)", None), ("optax.adam(0.01)", optax.adam(0.01))):
            lr = 0.01 if opt is None else None
            reference = opt if opt is not None else optax.sgd(0.01)
            ts = TrainingStep(loss, opt)
            state = ts.init(params)

            def ours():
                r = ts.run(params, state, inputs, lr, n=STEPS)
                jax.block_until_ready(r.params)
                return r

            @jax.jit
            def train_step(p, s, inputs):
                value, grads = jax.value_and_grad(loss)(p, **inputs)
                updates, s = reference.update(grads, s, p)
                return optax.apply_updates(p, updates), s, value

            ref_state = reference.init(params)

            def python_loop():
                p, s = params, ref_state
                losses = []
                for _ in range(STEPS):
                    p, s, value = train_step(p, s, inputs)
                    losses.append(value)
                jax.block_until_ready(p)
                return p, [float(v) for v in losses]

            @jax.jit
            def scanned(p, s, inputs):
                def body(carry, _):
                    p, s = carry
                    value, grads = jax.value_and_grad(loss)(p, **inputs)
                    updates, s = reference.update(grads, s, p)
                    return (optax.apply_updates(p, updates), s), value

                (p, s), losses = jax.lax.scan(body, (p, s), None, length=STEPS)
                return p, s, losses

            def scan_loop():
                p, _, losses = scanned(params, ref_state, inputs)
                jax.block_until_ready(p)
                return p, np.asarray(losses).tolist()

            timed = _interleaved({"ours": ours, "python_loop": python_loop, "scan": scan_loop}, repeats)
            ours_s, py_s, scan_s = timed["ours"], timed["python_loop"], timed["scan"]
            ours_ms, py_ms, scan_ms = ours_s["median"], py_s["median"], scan_s["median"]
            # a fast wrong answer is no result: the three agree
            r, (p_py, l_py), (p_scan, l_scan) = ours(), python_loop(), scan_loop()
            agree = bool(
                np.allclose(r.losses, l_py, rtol=1e-4, atol=1e-6)
                and np.allclose(r.losses, l_scan, rtol=1e-4, atol=1e-6)
                and all(
                    np.allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)
                    for p_ref in (p_py, p_scan)
                    for a, b in zip(jax.tree.leaves(r.params), jax.tree.leaves(p_ref))
                )
            )
            best = min(py_ms, scan_ms)
            results[f"{model} | {opt_name}"] = {
                "params": n_params,
                "ours_ms": ours_ms,
                "python_loop_ms": py_ms,
                "scan_ms": scan_ms,
                "ratio_to_best": ours_ms / best,
                "agree": agree,
                "traces": dict(ts.traces),
                "ours": ours_s,
                "python_loop": py_s,
                "scan": scan_s,
            }
    return results


def table(r: dict) -> Table:
    t = Table(
        f"6. {STEPS} training steps: TrainingStep.run(n={STEPS}) vs hand-written jitted optax loops (median)",
        [
            "model | optimizer",
            "run(n=100)",
            "jitted step x100 (Python loop)",
            "jitted lax.scan",
            "ratio to faster",
            "same numbers",
            "traces",
            "target",
            "ok/MISSED",
        ],
    )
    for name, v in r.items():
        t.add(
            name,
            fmt(v["ours_ms"], " ms"),
            fmt(v["python_loop_ms"], " ms"),
            fmt(v["scan_ms"], " ms"),
            fmt(v["ratio_to_best"], "x"),
            fmt(v["agree"]),
            f"step {v['traces']['step']}, run {v['traces']['run']}",
            f"≤ {TARGET_RATIO:g}x",
            verdict(v["ratio_to_best"] <= TARGET_RATIO and v["agree"]),
        )
    t.notes.append(
        "run(n) is one compiled while_loop over a fixed 256-loss buffer (any n reuses it) that also "
        "checks each step is finite and stops before one that is not; the references do no such check"
    )
    return t


# ---------------------------------------------------------------------------------------- an explorer's first steps
FIRST_STEPS = ("build", "first Step", "second Step", "Step ×10", "Reset + Step")


def _explorers() -> dict:
    """The lesson's explorer (plain SGD) and an XOR MLP's (2-8-1, tanh, optax.adam), each built
    fresh by its function (JAX arrays as params, as a model's init gives them)."""
    import jax.numpy as jnp
    import numpy as np
    import optax

    from pytree_lab import StepExplorer

    x = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32)
    y = np.array([0, 1, 1, 0], np.float32)

    def xor_loss(p, x, y):
        h = jnp.tanh(x @ p["hidden"]["w"] + p["hidden"]["b"])
        return jnp.mean(((h @ p["out"]["w"] + p["out"]["b"])[:, 0] - y) ** 2)

    def xor():
        rng = np.random.default_rng(0)
        params = {
            "hidden": {"w": jnp.asarray(rng.normal(size=(2, 8)), jnp.float32), "b": jnp.zeros(8, jnp.float32)},
            "out": {"w": jnp.asarray(rng.normal(size=(8, 1)), jnp.float32), "b": jnp.zeros(1, jnp.float32)},
        }
        return StepExplorer(xor_loss, params, {"x": x, "y": y}, 0.05, optimizer=lambda lr: optax.adam(lr))

    return {"lesson model, plain SGD": StepExplorer, "XOR MLP 2-8-1, optax.adam": xor}


def run_explorer(repeats: int = 5) -> dict:
    """Milliseconds of each of `FIRST_STEPS` (medians over `repeats` fresh explorers: each builds
    and compiles its own step), how many times XLA compiled one of the explorer's functions after
    the first Step (issue 44: none; counted from JAX's compile events) and whether every step worked."""
    import jax

    compiled: list[str] = []

    def listen(event: str, seconds: float, **kw) -> None:
        if event == "/jax/core/compile/backend_compile_duration" and "(_traced" in str(kw.get("fun_name")):
            compiled.append(str(kw.get("fun_name")))

    jax.monitoring.register_event_duration_secs_listener(listen)
    results: dict = {}
    try:
        for name, build in _explorers().items():
            times: dict = {phase: [] for phase in FIRST_STEPS}
            again, ok = 0, True
            for _ in range(repeats):
                box: list = []
                for phase, act in zip(
                    FIRST_STEPS,
                    (
                        lambda: box.append(build()) or box[0],
                        lambda: box[0].step(1),
                        lambda: box[0].step(1),
                        lambda: box[0].step(10),
                        lambda: box[0].reset() and box[0].step(1),
                    ),
                ):
                    if phase == "second Step":
                        compiled.clear()
                    t0 = time.perf_counter()
                    ok = act() is not None and ok  # a step that failed returns None (said in the widget)
                    times[phase].append((time.perf_counter() - t0) * 1e3)
                again += len(compiled)
                box[0].close()
            results[name] = {
                "ms": {phase: summary(v) for phase, v in times.items()},
                "compiles_after_first_step": again,
                "steps_ok": ok,
            }
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    return results


def table_explorer(r: dict) -> Table:
    t = Table(
        "6c. An explorer's first steps: a fresh StepExplorer, then Step, Step, Step ×10, Reset + Step (median)",
        ["model | optimizer", *FIRST_STEPS, "compiles after the first Step", "every step ok"],
    )
    for name, v in r.items():
        ms = [fmt(v["ms"][phase]["median"], " ms") for phase in FIRST_STEPS]
        t.add(name, *ms, fmt(v["compiles_after_first_step"]), fmt(v["steps_ok"]))
    n = min(s["n"] for v in r.values() for s in v["ms"].values())
    t.notes.append(
        f"medians over {n} fresh explorers each; build compiles the slider step (value_and_grad, update), the first "
        "Step the n-step loop; after it nothing compiles again (issue 44: an optimizer state or params of "
        "uncommitted arrays compiled the loop again at the second Step)"
    )
    return t


if __name__ == "__main__":
    res = run()
    print(table(res).render())


# ---------------------------------------------------------------------------------------- in the browser
BROWSER_CELLS = [
    "import optax\nfrom pytree_lab import StepExplorer\nex = StepExplorer(optimizer=optax.adam(0.1))\nex",
]

# Click a button and time it until the loss line has `n` points: click -> chart updated.
_CLICK_UNTIL_POINTS = """
async ({button, fig, n, timeout}) => {
  const count = () => { const p = fig.querySelector('path.line');
    return p ? ((p.getAttribute('d') || '').match(/[ML]/g) || []).length : 0; };
  const t0 = performance.now();
  const done = new Promise((resolve) => {
    const check = () => { if (count() === n) { obs.disconnect(); resolve(performance.now() - t0); } };
    const obs = new MutationObserver(check);
    obs.observe(fig, {subtree: true, attributes: true, childList: true});
    setTimeout(() => { obs.disconnect(); resolve(null); }, timeout);
  });
  button.click();
  return await done;
}
"""


def run_browser(lab, clicks: int = 15) -> dict:
    """Step ×10 in JupyterLab + Chromium: click -> loss line redrawn with ten more points, and the
    kernel's own time for ex.step(10) (a compiled loop plus one redraw of every view)."""
    nb = lab.notebook("bench_training.ipynb", BROWSER_CELLS, wait_for='[role="tree"]')
    try:
        panel = nb.panel
        fig = panel.locator(".bqplot.figure").nth(1)
        fig.locator("path.line").wait_for(state="attached")
        step10 = panel.get_by_role("button", name="Step ×10", exact=True)
        reset = panel.get_by_role("button", name="Reset", exact=True)
        times, points = [], 1
        for i in range(clicks + 1):
            if points > 100:  # keep the history short, like a person would: Reset, then on
                lab.page.evaluate(
                    _CLICK_UNTIL_POINTS,
                    {"button": reset.element_handle(), "fig": fig.element_handle(), "n": 1, "timeout": 10000},
                )
                points = 1
            ms = lab.page.evaluate(
                _CLICK_UNTIL_POINTS,
                {"button": step10.element_handle(), "fig": fig.element_handle(), "n": points + 10, "timeout": 10000},
            )
            points += 10
            if i > 0:  # the first click also compiles the loop
                times.append(ms if ms is not None else float("nan"))
        history = nb.value("len(ex.history)")
        kernel = nb.value(
            "(lambda t, ex: [(lambda s: (ex.step(10), t.perf_counter() - s)[1])(t.perf_counter()) * 1e3 "
            "for _ in range(10)])(__import__('time'), ex)"
        )
        return {
            "click_to_chart_ms": summary(times),
            "missed": sum(1 for t in times if t != t),
            "history_points": history,
            "kernel_step10_ms": summary(kernel),
        }
    finally:
        nb.close()


def table_browser(r: dict) -> Table:
    t = Table(
        "6b. Step ×10 in JupyterLab + Chromium: button click -> loss line redrawn with ten more points",
        ["what", "median", "p95", "n"],
    )
    c, k = r["click_to_chart_ms"], r["kernel_step10_ms"]
    t.add("click -> chart updated (page)", fmt(c["median"], " ms"), fmt(c["p95"], " ms"), str(c["n"]))
    t.add("ex.step(10) in the kernel (loop + every view)", fmt(k["median"], " ms"), fmt(k["p95"], " ms"), str(k["n"]))
    if r["missed"]:
        t.notes.append(f"{r['missed']} clicks did not redraw within 10 s")
    return t
