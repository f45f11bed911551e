"""One copy of what the widget modules share (issue 21): static/_shared.js.

`h` (an element, its text as text), `keepKeys` (keys typed in a widget never reach the
notebook's command mode) and the kernel-gone notice live in _shared.js only; page.py puts
that script before every module that calls one of its functions (the names read from the script
itself), never before the slider proxy. The page gets one plain ES module per widget: node
parses each as a module (a name declared twice, by the script and by the module, is an error
there), and the script goes without its whole-line comments, its code unchanged.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import anywidget
import pytest

from pytree_lab import page as _static
from pytree_lab.page import SHARED_JS, SHARED_NAMES, SHARED_SOURCE, STATIC, static_asset

MODULES = sorted(p.name for p in STATIC.glob("*.js") if not p.name.startswith("_"))
TOP_LEVEL = re.compile(r"^(?:async\s+)?(?:function\*?|const|let|var|class)\s+(\w+)", re.M)


def _calls(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w$.]){re.escape(name)}\(", text) is not None


def test_the_names_come_from_the_script_and_no_module_keeps_a_copy():
    assert set(SHARED_NAMES) == set(re.findall(r"^function (\w+)\(", SHARED_SOURCE, re.M))
    assert {"h", "keepKeys", "kernelGone", "watchKernel"} <= set(SHARED_NAMES)
    shared_top = set(TOP_LEVEL.findall(SHARED_SOURCE))
    for name in MODULES:
        own = set(TOP_LEVEL.findall((STATIC / name).read_text(encoding="utf-8")))
        assert not own & shared_top, f"{name} declares what _shared.js declares: {own & shared_top}"


@pytest.mark.parametrize("name", MODULES)
def test_a_module_gets_the_script_when_it_calls_it(name):
    source = (STATIC / name).read_text(encoding="utf-8")
    sent = static_asset(name)
    if name == "slider_proxy.js":
        assert sent == source and not any(_calls(source, n) for n in SHARED_NAMES)
        return
    # the seven widget modules all draw with h and keep their keys
    assert _calls(source, "h") and _calls(source, "keepKeys") and _calls(source, "watchKernel")
    assert sent == SHARED_JS + "\n" + source
    assert sent.count("function keepKeys(") == 1 and sent.count("function h(") == 1


def test_a_module_that_calls_any_one_shared_function_gets_the_script():
    for fn in SHARED_NAMES:
        assert _static.with_shared("x.js", f"// @ts-check\nconst a = {fn}(b);\n").startswith(SHARED_JS)
    # a method or a longer name of the same ending is not a call of the shared function
    assert _static.with_shared("x.js", "obj.h(1); math(2); my_keepKeys(3);\n") == "obj.h(1); math(2); my_keepKeys(3);\n"
    assert _static.with_shared("x.css", "h(1)") == "h(1)"


def test_the_script_goes_without_its_comments_and_indentation_and_with_all_its_code():
    def code_lines(text):
        lines = []
        in_block = False
        for line in text.splitlines():
            s = line.strip()
            if in_block:
                in_block = "*/" not in s
                continue
            if s.startswith("/*"):
                in_block = "*/" not in s
                continue
            if s and not s.startswith("//"):
                lines.append(s)  # the page gets each line without its indentation
        return lines

    assert code_lines(SHARED_JS) == code_lines(SHARED_SOURCE)
    assert len(code_lines(SHARED_SOURCE)) > 40
    comments = [line for line in SHARED_JS.splitlines() if line.strip().startswith(("//", "/*", "*"))]
    assert comments == ["// pytree-lab: static/_shared.js, its comments and indentation left out"]
    assert not any(line[:1].isspace() for line in SHARED_JS.splitlines())
    assert len(SHARED_JS) < 0.6 * len(SHARED_SOURCE)


def test_each_module_as_sent_parses_as_one_es_module(tmp_path):
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is missing: this check needs Node.js (as tests/test_js_types.py does)", pytrace=False)
    for name in MODULES:
        path = tmp_path / (name[:-3] + ".mjs")
        path.write_text(static_asset(name), encoding="utf-8")
        result = subprocess.run([node, "--check", str(path)], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, f"{name}: {result.stderr}"
    # and node does refuse a module that declares a shared name again (what the check is for)
    bad = tmp_path / "bad.mjs"
    bad.write_text(
        static_asset("play.js").replace("export default", "function h() {}\nexport default"), encoding="utf-8"
    )
    result = subprocess.run([node, "--check", str(bad)], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "SyntaxError" in result.stderr


def test_live_reload_still_gets_the_script(monkeypatch):
    monkeypatch.setenv("ANYWIDGET_HMR", "1")
    live = static_asset("play.js")
    proxy = static_asset("slider_proxy.js")
    try:
        assert str(live) == static_asset_text("play.js")
        assert str(proxy) == (STATIC / "slider_proxy.js").read_text(encoding="utf-8")

        class Live(anywidget.AnyWidget):
            _esm = live

        widget = Live()
        try:
            assert widget.get_state()["_esm"] == SHARED_JS + "\n" + (STATIC / "play.js").read_text(encoding="utf-8")
        finally:
            widget.close()
    finally:
        live.stop_thread()
        proxy.stop_thread()


def static_asset_text(name: str) -> str:
    return _static.with_shared(name, (STATIC / name).read_text(encoding="utf-8"))
