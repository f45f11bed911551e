"""Hostile text in a real JupyterLab page: keys, field names and string leaves render as text.

Every payload would set `window.__pwned` if the browser ever parsed it as HTML or ran it.
The tests assert the literal text is on screen, nothing ran, and no element came out of the
text. The page only sends intents back (a path to select, paths to fold); a crafted path
selects nothing and runs nothing in the kernel.
"""

from __future__ import annotations

import pytest

from .harness import Timeouts
from .pages import css_string, tree_item

pytestmark = pytest.mark.browser

IMG = "<img src=x onerror=window.__pwned=1>"
SCRIPT = "</script><script>window.__pwned=2</script>"
FIELD = "<img src=y onerror=window.__pwned=3>"
STRING_LEAF = "<b onmouseover=window.__pwned=4>bold</b><script>window.__pwned=5</script>"
TYPE_NAME = "<svg onload=window.__pwned=6>"
PAYLOADS = [IMG, SCRIPT, FIELD, STRING_LEAF[:37], TYPE_NAME]

SETUP = f'''
import jax, jax.numpy as jnp
from pytree_lab import PytreeDiagram, StepExplorer

IMG, SCRIPT, FIELD = {IMG!r}, {SCRIPT!r}, {FIELD!r}
STRING_LEAF, TYPE_NAME = {STRING_LEAF!r}, {TYPE_NAME!r}

class Layer:
    """A registered node whose one field is called FIELD."""
    def __init__(self, **fields):
        for name, value in fields.items():
            setattr(self, name, value)

jax.tree_util.register_dataclass(Layer, data_fields=[FIELD], meta_fields=[])
Odd = type(TYPE_NAME, (), {{}})  # a leaf whose type name is hostile

tree = {{IMG: jnp.array([1.0, 2.0]), SCRIPT: {{"name": STRING_LEAF}},
        "layer": Layer(**{{FIELD: jnp.array(0.5)}}), "odd": Odd()}}
grads = {{IMG: jnp.array([0.1, 0.2]), "layer": Layer(**{{FIELD: jnp.array(0.0)}})}}  # disagrees: a banner
diagram = PytreeDiagram(tree, grads=grads)
diagram
'''

EXPLORER = '''
params = {IMG: jnp.array([1.0, -1.0]), SCRIPT: jnp.array(0.0)}

def hostile_loss(p, x, target):
    return (jnp.dot(p[IMG], x) + p[SCRIPT] - target) ** 2

ex = StepExplorer(hostile_loss, params, {"x": jnp.array([2.0, 1.0]), "target": jnp.array(3.0)})
ex
'''

# Everything a payload could have produced inside the notebook's outputs.
_CREATED = """
(panel) => {
  const outs = [...panel.querySelectorAll('.jp-OutputArea-output')];
  const q = (sel) => outs.reduce((n, o) => n + o.querySelectorAll(sel).length, 0);
  return {
    img: q('img'), script: q('script'), b: q('b'),
    handlers: q('[onerror],[onload],[onmouseover]'),
    svgFromText: outs.reduce((n, o) => n + [...o.querySelectorAll('svg')].filter(s => !s.closest('.bqplot')).length, 0),
  };
}
"""


def assert_nothing_ran(nb) -> None:
    assert nb.page.evaluate("() => window.__pwned") is None
    made = nb.panel.evaluate(_CREATED)
    assert made == {"img": 0, "script": 0, "b": 0, "handlers": 0, "svgFromText": 0}, made


def test_hostile_keys_field_names_and_leaves_render_as_text(open_nb):
    nb = open_nb([SETUP], wait_for='[role="tree"]')
    tree = nb.panel.locator('[role="tree"]').first
    text = tree.inner_text()
    for payload in (IMG, SCRIPT, FIELD, TYPE_NAME):
        assert payload in text, payload
    # the string leaf is summarised as its repr, cut at 40 characters, still literal
    assert repr(STRING_LEAF)[:37] in text
    # the hostile key is the row's data-path (keystr), found by exact attribute match
    key_row = tree_item(nb.panel, f"[{IMG!r}]")
    assert key_row.count() == 1 and key_row.locator(".ptl-key").first.text_content() == IMG
    field_row = tree_item(nb.panel, f"['layer'].{FIELD}")
    assert field_row.count() == 1
    # the diagnosis banner quotes hostile paths: also text
    banner = nb.panel.locator(".ptl-message").first
    assert banner.is_visible() and SCRIPT in banner.text_content()
    # hovering the string leaf would fire an onmouseover handler, were there one
    tree_item(nb.panel, f"[{SCRIPT!r}]['name']").hover()
    assert_nothing_ran(nb)
    # control: the same payload parsed as HTML does run in this browser, so the checks can fail
    nb.page.evaluate(
        """(html) => { const d = document.createElement('div'); d.id = 'ptl-control';
                        d.innerHTML = html; document.body.append(d); }""",
        IMG.replace("__pwned=1", "__control=1"),
    )
    nb.page.wait_for_function("() => window.__control === 1", timeout=Timeouts.ms(Timeouts.ROUND_TRIP))
    nb.page.evaluate("() => document.getElementById('ptl-control').remove()")


def test_explorer_calculation_and_status_escape_hostile_keys(open_nb):
    nb = open_nb([SETUP, EXPLORER], wait_for=".ptl-calc")
    calc = nb.panel.locator(".ptl-calc").first
    assert f"∂L/∂{IMG}" in calc.inner_text()
    assert nb.value("ex.result.loss") == 4.0
    # a refused tree: the message (role=alert) names the hostile path, as text
    nb.run("ex.set_params({IMG: jnp.array([1.0, -1.0]), SCRIPT: STRING_LEAF})")
    alert = nb.panel.locator('.pytree-lab-status [role="alert"]').first
    alert.wait_for(timeout=Timeouts.ms(Timeouts.ROUND_TRIP))
    assert f"params[{SCRIPT!r}] is str" in alert.text_content()
    assert f"params[{SCRIPT!r}] is str" in nb.panel.locator(".ptl-message").last.text_content()
    # said once on screen: in the status line above the controls, not again in the diagram's banner
    assert alert.is_visible() and not nb.panel.locator(".ptl-message").last.is_visible()
    assert_nothing_ran(nb)
    # The calculation's module draws the kernel's markup in its own vocabulary only, whoever wrote
    # the state (on the Lite site, a notebook's saved widget state is drawn by the same module
    # before any kernel exists): a crafted value keeps its table's cells, and nothing else.
    crafted = (
        '<table class="ptl-calc"><tr data-path="x"><td onmouseover="window.__pwned=7">crafted cell</td>'
        f'<td style="background: url(x)">{IMG}<script>window.__pwned=8</script>'
        '<a href="javascript:window.__pwned=9">a link</a><b>bold</b></td></tr></table>'
    )
    nb.run(f"ex.calculation.value = {crafted!r}")
    cell = nb.panel.locator(".pytree-lab-calculation td", has_text="crafted cell")
    cell.wait_for(timeout=Timeouts.ms(Timeouts.ROUND_TRIP))
    cell.hover()
    drawn = nb.panel.locator(".pytree-lab-calculation tr[data-path='x']")
    kept = "el => [...el.querySelectorAll('*')].map(e => [e.outerHTML.split('>')[0], e.textContent])"
    assert drawn.evaluate(kept) == [
        ["<td", "crafted cell"],
        ["<td", ""],
    ]
    assert_nothing_ran(nb)


def test_the_page_sends_intents_and_bogus_ones_are_refused(open_nb, tmp_path):
    marker = tmp_path / "pwned"
    nb = open_nb([SETUP], wait_for='[role="tree"]')
    row = tree_item(nb.panel, f"[{IMG!r}]")
    row.locator(":scope > .ptl-line").click()
    assert nb.wait_for_value("diagram.selected_path", f"[{IMG!r}]") == f"[{IMG!r}]"
    # A tampered page: the row now claims to be a path that is code; clicking sends it.
    crafted = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    row.evaluate("(el, p) => { el.dataset.path = p; }", crafted)
    nb.panel.locator(f'[role="treeitem"][data-path={css_string(crafted)}] > .ptl-line').click()
    # the kernel refuses it: nothing selected, nothing run
    assert nb.wait_for_value("diagram.selected_path", "") == ""
    assert not marker.exists()
    # folding a path the tree does not have: the page does not even send it
    nb.run("diagram.collapsed = []")
    nb.panel.locator(f'[role="treeitem"][data-path={css_string(crafted)}] > .ptl-line').dblclick()
    nb.page.wait_for_timeout(300)
    assert nb.value("diagram.collapsed") == []
    assert not marker.exists()
    assert_nothing_ran(nb)
