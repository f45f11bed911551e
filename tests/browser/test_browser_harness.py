"""The harness itself, proven on a tiny inline anywidget: a button that counts clicks.

If these fail, the widget tests' failures say nothing about pytree-lab.
"""

import pytest

from .harness import DARK, LIGHT, set_theme

pytestmark = pytest.mark.browser

COUNTER = '''
import anywidget, traitlets

class Counter(anywidget.AnyWidget):
    _esm = """
    export default {
      render({ model, el }) {
        const button = document.createElement("button");
        button.className = "counter-button";
        const show = () => { button.textContent = `clicks: ${model.get("clicks")}`; };
        button.addEventListener("click", () => {
          model.set("clicks", model.get("clicks") + 1);
          model.save_changes();
        });
        model.on("change:clicks", show);
        show();
        el.appendChild(button);
      },
    };
    """
    clicks = traitlets.Int(0).tag(sync=True)

counter = Counter()
counter
'''


@pytest.fixture(scope="module")
def counter_nb(open_module_nb):
    return open_module_nb([COUNTER, "answer = {'x': [1.5, 2]}"], wait_for=".counter-button")


def test_click_reaches_python_and_python_reaches_dom(counter_nb):
    nb = counter_nb
    button = nb.panel.locator(".counter-button")
    assert button.text_content() == "clicks: 0"
    assert nb.value("counter.clicks") == 0

    button.click()
    button.click()
    assert nb.wait_for_value("counter.clicks", 2) == 2

    nb.run("counter.clicks = 41")
    nb.page.wait_for_function("(el) => el.textContent === 'clicks: 41'", arg=button.element_handle())
    button.click()
    assert nb.wait_for_value("counter.clicks", 42) == 42


def test_probe_reads_values_and_reports_kernel_errors(counter_nb):
    assert counter_nb.value("answer") == {"x": [1.5, 2]}
    with pytest.raises(AssertionError, match="NameError"):
        counter_nb.value("no_such_name")
    with pytest.raises(AssertionError, match="ZeroDivisionError"):
        counter_nb.run("1 / 0")
    # the probe's requests stay out of the notebook: no new outputs, no execution count
    counts = counter_nb.page.evaluate(
        "() => [...document.querySelectorAll('.jp-InputArea-prompt')].map(p => p.textContent.trim())"
    )
    assert counts == ["[1]:", "[2]:"]


def test_failing_cell_is_reported(open_nb):
    with pytest.raises(AssertionError, match="ZeroDivisionError"):
        open_nb(["1 / 0"])


def test_theme_switch(lab_page):
    def background():
        return lab_page.evaluate("() => getComputedStyle(document.body).getPropertyValue('--jp-layout-color0')")

    light_bg = background()
    set_theme(lab_page, DARK)
    assert lab_page.evaluate("() => document.body.dataset.jpThemeLight") == "false"
    dark_bg = background()
    assert dark_bg.strip() and dark_bg != light_bg
    set_theme(lab_page, LIGHT)
    assert lab_page.evaluate("() => document.body.dataset.jpThemeLight") == "true"
    assert background() == light_bg


def test_missing_chromium_fails_loudly(monkeypatch, tmp_path):
    from . import harness

    monkeypatch.setattr(harness, "CHROMIUM", str(tmp_path / "no-chromium"))
    # launch is never reached: the check comes first, so no browser object is needed
    with pytest.raises(AssertionError, match="no-chromium is missing"):
        harness.launch_chromium(playwright=None)
