"""The pytree lesson on the built site when numpy cannot be downloaded, in Debian's Chromium.

Pyodide's CDN (numpy, pandas) is either refused (offline: the request fails at once) or
black-holed (a firewall that drops packets: the request never gets an answer). A student
opens the course's first notebook and runs Run All. What must be on screen: the setup cell's
one line (numpy is loading in the background), then under the first cell that needs numpy
(`import jax`) the plain message of what happened and what still works, once the load's own
bound has run out; the lesson's tree diagram drawn from plain Python values, one short line
(no traceback) under each later cell that needs numpy, and Run All reaching the last cell.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from dataclasses import dataclass, field

import pytest

from lite_build import browse

from .conftest import ROOT

pytestmark = pytest.mark.browser

LESSON = "01_pytrees.ipynb"


@dataclass
class LessonRun:
    setup_output: str = ""
    numpy_request_s: float | None = None  # kernel ready -> the first request for numpy
    setup_seconds: float = 0.0  # recorded for the artifact, not asserted (timing is the benchmark's)
    prompts: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    tree_paths: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    failure: str = ""

    def check(self) -> None:
        if self.failure:
            raise AssertionError(self.failure)


def run_lesson(pw, url: str, black_hole: bool) -> LessonRun:
    run = LessonRun()
    browser = browse.launch(pw)
    try:
        context, net = browse.offline_context(browser, black_hole=black_hole)
        page = context.new_page()
        try:
            browse.open_notebook(page, url, LESSON, net)
            browse.wait_kernel_ready(page)
            started = time.monotonic()
            browse.run_all(page)  # from a fresh kernel: the setup cell first, then the lesson
            run.setup_seconds = time.monotonic() - started  # Run All as a whole (not asserted)
            if net.outside:
                run.numpy_request_s = round(net.outside[0][0] - started, 2)
            # textContent: cells scrolled out of view are not rendered, but their text is there
            seen = browse.code_cells(page).evaluate_all("""cells => cells.map(c => ({
                prompt: c.querySelector('.jp-InputPrompt').textContent.trim(),
                outputs: [...c.querySelectorAll('.jp-OutputArea-output')].map(o => o.textContent).join('\\n'),
                stderr: [...c.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
                    .map(o => o.textContent.trim()).join('\\n'),
            }))""")
            run.prompts = [c["prompt"] for c in seen]
            run.outputs = [c["outputs"] for c in seen]
            run.stderr = [c["stderr"] for c in seen]
            run.setup_output = run.outputs[0]
            items = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) [role=tree] [data-path]")
            items.first.wait_for(state="attached", timeout=browse.Timeouts.ms(browse.Timeouts.WIDGET))
            run.tree_paths = [p for p in items.evaluate_all("els => els.map(e => e.dataset.path)")]
            shot = ROOT / "artifacts" / f"lite-no-numpy-{'black-hole' if black_hole else 'refused'}.png"
            shot.parent.mkdir(exist_ok=True)
            page.screenshot(path=str(shot), full_page=False)
        except Exception as err:
            run.failure = f"{type(err).__name__}: {err}\nsetup cell: {run.setup_output!r}"
        run.refused = sorted(set(net.refused))
        (ROOT / "artifacts").mkdir(exist_ok=True)
        (ROOT / "artifacts" / f"lite-no-numpy-{'black-hole' if black_hole else 'refused'}.json").write_text(
            json.dumps(dataclasses.asdict(run), indent=1))
        browse.release(net)
        context.close()
    finally:
        browser.close()
    return run


@pytest.fixture(scope="session")
def refused_run(lite_server, pw) -> LessonRun:
    return run_lesson(pw, lite_server.url, black_hole=False)


@pytest.fixture(scope="session")
def black_hole_run(lite_server, pw) -> LessonRun:
    return run_lesson(pw, lite_server.url, black_hole=True)


def check_degraded_lesson(run: LessonRun) -> None:
    run.check()
    assert run.setup_output.strip() == (
        "numpy and pandas are loading in the background (from cdn.jsdelivr.net): tree diagrams work now; "
        "a cell that needs numpy waits until they are loaded.\n"
        "Your work in this site is kept in this browser only (not on a server, not in other browsers): "
        "File > Download saves a notebook to your computer."), run.setup_output
    # the message, once, under the first cell that needs numpy: the lesson's `import jax` cell
    said = [i for i, out in enumerate(run.outputs) if "numpy could not be downloaded from Pyodide's CDN: " in out]
    assert said == [1], said
    message = run.outputs[1]
    assert "Still working: tree diagrams" in message and "Needing numpy: gradient steps" in message
    assert "computing with pytree-lab Lite engine" in message and "numpy could not be loaded here" in message
    # Run All went through to the last cell
    assert run.prompts and all(re.fullmatch(r"\[\d+\]:", p) for p in run.prompts), run.prompts
    # no traceback anywhere; each complaint is one short line
    for i, (out, err) in enumerate(zip(run.outputs, run.stderr)):
        assert "Traceback" not in out, f"cell {i}: {out}"
        for line in err.splitlines():
            assert len(line) < 400, f"cell {i}: {line}"
        assert len(err.splitlines()) <= 1, f"cell {i}: {err}"
    needs_numpy = [e for e in run.stderr if "needs numpy" in e or "numpy could not be" in e or "numpy is not" in e]
    assert needs_numpy, "no cell said it needs numpy"
    # the lesson's params tree, drawn from plain values: weight's two entries and bias
    assert {"['bias']", "['weight']"} <= set(run.tree_paths), run.tree_paths
    assert "['weight'][0]" not in run.tree_paths  # one leaf, as in JAX
    # the numpy probe is the only thing that tried to leave the site
    assert run.refused and all("cdn.jsdelivr.net/pyodide/" in u for u in run.refused), run.refused


def test_cdn_refused_the_lesson_degrades_to_trees(refused_run):
    check_degraded_lesson(refused_run)
    assert "was refused or the network is offline" in refused_run.outputs[1]


def test_cdn_black_holed_the_setup_cell_ends_in_seconds(black_hole_run):
    check_degraded_lesson(black_hole_run)
    # the probe's own bound ended the wait (a hanging fetch would have kept the cell at [*]
    # until run_all's timeout failed the test); how long the cell takes is the benchmark's job
    assert "no answer from cdn.jsdelivr.net within 8 s" in black_hole_run.outputs[1]
