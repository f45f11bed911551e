"""The slider module reaches the page once per explorer (issue 21, section 2).

A `Slider` made alone carries its front-end module (static/slider.js and slider.css). Sliders
made with ``module=`` a `SliderModule` carry a loader (static/slider_proxy.js) and a reference
to that widget, which carries the module once; a `StepExplorer` makes one for all its sliders.
The sizes are those of the comm open messages (each widget's full state, binary buffers
counted by their bytes), what a page receives when the explorer is shown.
"""

from __future__ import annotations

import json

import pytest
import traitlets
from ipywidgets.widgets.widget import _remove_buffers

from pytree_lab import StepExplorer
from pytree_lab.explorer.lifetime import descendants as _descendants
from pytree_lab.page import STATIC, static_asset
from pytree_lab.slider import Slider, SliderModule

SLIDER_JS = static_asset("slider.js")  # as the page gets it (with the shared part in front)
SLIDER_CSS = (STATIC / "slider.css").read_text(encoding="utf-8")
PROXY_JS = static_asset("slider_proxy.js")


def state_bytes(widget) -> int:
    """The size of the state a widget's comm open message carries."""
    plain, _, buffers = _remove_buffers(widget.get_state())
    return len(json.dumps(plain, separators=(",", ":"))) + sum(memoryview(b).nbytes for b in buffers)


@pytest.fixture
def explorer():
    ex = StepExplorer()
    yield ex
    ex.close()


def test_a_slider_alone_carries_the_module_and_a_shared_one_a_reference():
    alone = Slider(1.0, description="x")
    module = SliderModule()
    shared = [Slider(float(v), description=f"x{v}", module=module) for v in range(3)]
    try:
        assert alone.get_state()["_esm"] == SLIDER_JS and alone.get_state()["_css"] == SLIDER_CSS
        assert alone.get_state()["module"] is None
        assert module.get_state()["_esm"] == SLIDER_JS and module.get_state()["_css"] == SLIDER_CSS
        for s in shared:
            state = s.get_state()
            assert state["_esm"] == PROXY_JS and state["_css"] == ""
            assert state["module"] == f"anywidget:{module.model_id}"
            assert state["value"] == s.value and state["path"] == s.description
        assert len(PROXY_JS) < 1000 < len(SLIDER_JS)
        with pytest.raises(traitlets.TraitError, match="set when the slider is made"):
            alone.module = module  # its page view carries its own module, and keeps it
        with pytest.raises(traitlets.TraitError, match="set when the slider is made"):
            shared[0].module = None
        assert alone.module is None and shared[0].module is module
        assert max(state_bytes(s) for s in shared) < 2000 < state_bytes(alone)
    finally:
        for w in [alone, module, *shared]:
            w.close()


def test_the_page_writes_no_trait_of_a_shared_slider_or_of_its_module():
    module = SliderModule()
    other = SliderModule()
    s = Slider(1.0, description="x", module=module)
    try:
        s.set_state({"module": f"anywidget:{other.model_id}", "_esm": "export default {}", "value": 3.0})
        assert s.module is module and s.get_state()["_esm"] == PROXY_JS and s.value == 1.0
        assert s.refused_page_writes == {"module": 1, "_esm": 1, "value": 1}
        module.set_state({"_esm": "export default {}", "_css": "* {display: none}"})
        assert module.get_state()["_esm"] == SLIDER_JS and module.get_state()["_css"] == SLIDER_CSS
        assert module.refused_page_writes == {"_esm": 1, "_css": 1}
        # moves still arrive as messages, numbered and acknowledged as for a slider alone
        s._handle_custom_msg({"type": "move", "value": 2.5, "seq": 1, "view": "v"}, [])
        assert s.value == 2.5 and s.ack == 1 and s.moves == 1
    finally:
        for w in (s, module, other):
            w.close()


def test_module_takes_only_an_open_slider_module():
    with pytest.raises(TypeError, match="module= takes a SliderModule, not Slider"):
        Slider(1.0, module=Slider(0.0))
    closed = SliderModule()
    closed.close()
    with pytest.raises(ValueError, match="closed SliderModule"):
        Slider(1.0, module=closed)


def test_an_explorer_sends_the_slider_module_once(explorer):
    built = _descendants(explorer)
    sliders = [w for w in built if isinstance(w, Slider)]
    modules = [w for w in built if isinstance(w, SliderModule)]
    assert len(sliders) == len(explorer.sliders) == 7  # x[0], x[1], target, weight[0], weight[1], bias, lr
    assert len(modules) == 1 and all(s.module is modules[0] for s in sliders)
    carriers = [w for w in built if getattr(w, "_esm", None) == SLIDER_JS]
    assert carriers == modules  # slider.js reaches the page once, in the module widget

    slider_side = sum(state_bytes(w) for w in [*sliders, *modules, *(m.layout for m in modules)])
    total = sum(state_bytes(w) for w in built)
    # before: every slider carried slider.js and slider.css (7 copies, 77 KB of a 161 KB state)
    assert slider_side < len(SLIDER_JS) + len(SLIDER_CSS) + 7 * 1500
    # 125 KB until the Play control (its module, ~10 KB), the shared script (sent with each of
    # four modules) and the compact layout's boxes joined; 150.6 KB then, 143.0 KB once the
    # modules' copies of keepKeys and h became the one shared copy, sent without its comments;
    # 151.1 KB once the shared script also marks a widget of a gone kernel and lets Escape and
    # Shift/Ctrl+Enter leave a widget (about 1.3 KB, in each of four modules); 158.8 KB once the
    # worked calculation became a module of its own (it keeps what the person opened open across
    # redraws): its script, and the shared one with it (7.6 KB); 160.2 KB once that script keeps
    # only its own markup's elements and attributes (a state the kernel did not write runs nothing)
    # 161,000 before the grids' fitting and keyboard scrolling (issue 44), which every widget
    # module's copy of the shared script carries: 185.5 KB, 186.0 KB with the presenter's wider value
    # column; 182.9 KB once each copy of the shared script goes without its lines' indentation
    assert total < 183_500, total


def test_closing_the_explorer_closes_its_slider_module():
    ex = StepExplorer()
    (module,) = {id(s.module): s.module for s in ex.sliders.values()}.values()
    assert module.comm is not None
    ex.close()
    assert module.comm is None and all(s.comm is None for s in ex.sliders.values())
