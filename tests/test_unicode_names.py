"""Names from user trees as they are shown: keys that look alike are told apart, control and
bidi characters in a key or field name are escaped (no fake rows), right-to-left keys are
isolated in sentences (issue 20 section 6, "Unicode keys")."""

from __future__ import annotations

import unicodedata

import jax
import jax.numpy as jnp
import pytest
from jax.tree_util import GetAttrKey, register_pytree_with_keys

import pytree_lab
from pytree_lab.formatting import isolate_rtl, visible

NFC = unicodedata.normalize("NFC", "café")
NFD = unicodedata.normalize("NFD", "café")


def test_nfc_and_nfd_keys_are_told_apart_by_their_code_points():
    assert NFC != NFD and len(NFC) == 4 and len(NFD) == 5
    found = pytree_lab.diagnose({NFC: jnp.array(1.0)}, {NFD: jnp.array(1.0)})
    assert not found.ok and found.kind == "structure" and found.path == f"[{NFC!r}]"
    assert "differ only in Unicode normalisation (NFC vs NFD)" in found.message
    # the code points that differ, each tree's own
    assert "params: U+00E9 LATIN SMALL LETTER E WITH ACUTE;" in found.message
    assert "the gradient tree: U+0065 LATIN SMALL LETTER E U+0301 COMBINING ACUTE ACCENT)" in found.message
    assert "unicodedata.normalize('NFC', key)" in found.message


@pytest.mark.parametrize(
    "mine, theirs, mine_cp, theirs_cp",
    [
        ("a", "\u0430", "U+0061 LATIN SMALL LETTER A", "U+0430 CYRILLIC SMALL LETTER A"),
        ("bias", "bi\u0430s", "U+0061 LATIN SMALL LETTER A", "U+0430 CYRILLIC SMALL LETTER A"),
        ("scale", "\u0455cale", "U+0073 LATIN SMALL LETTER S", "U+0455 CYRILLIC SMALL LETTER DZE"),
        ("w1", "w\uff11", "U+0031 DIGIT ONE", "U+FF11 FULLWIDTH DIGIT ONE"),
        ("omega", "\u03bfmega", "U+006F LATIN SMALL LETTER O", "U+03BF GREEK SMALL LETTER OMICRON"),
    ],
)
def test_look_alike_keys_name_the_characters_that_differ(mine, theirs, mine_cp, theirs_cp):
    found = pytree_lab.diagnose({mine: 1.0}, {theirs: 1.0})
    assert not found.ok and found.path == f"[{mine!r}]"
    assert f"params has {mine_cp} where the gradient tree has {theirs_cp}." in found.message


def test_the_look_alike_pair_is_the_one_explained_among_several_renames():
    # 'x' -> 'y' is a plain rename; 'a' -> Cyrillic 'а' is the pair that needs the code points
    found = pytree_lab.diagnose({"a": 1.0, "x": 2.0}, {"\u0430": 1.0, "y": 2.0})
    assert found.path == "['a']"
    assert "missing ['a'] and has ['\u0430'] instead" in found.message
    assert "U+0430 CYRILLIC SMALL LETTER A" in found.message


def test_plain_ascii_renames_get_no_note():
    found = pytree_lab.diagnose({"w": 1.0}, {"x": 1.0})
    assert found.message == (
        "The gradient tree is missing ['w'] and has ['x'] instead: a renamed key is a "
        "different path, so ['w'] has no partner."
    )


@pytest.mark.parametrize(
    "raw, shown",
    [
        ("w\u202e\nfake", "w\\u202e\\nfake"),
        ("a\tb\rc", "a\\tb\\rc"),
        ("bell\x07", "bell\\x07"),
        ("c1\x85", "c1\\x85"),
        ("zw\u200bj\u200d", "zw\\u200bj\\u200d"),
        ("iso\u2066x\u2069", "iso\\u2066x\\u2069"),
        ("lrm\u200e rlm\u200f alm\u061c", "lrm\\u200e rlm\\u200f alm\\u061c"),
        ("sep\u2028\u2029", "sep\\u2028\\u2029"),
        ("bom\ufeff", "bom\\ufeff"),
        ("café وزن ☃", "café وزن ☃"),  # printable text stays as it is
    ],
)
def test_visible_escapes_what_draws_nothing_or_reorders(raw, shown):
    assert visible(raw) == shown


def _field_tree(name: str, value):
    class Holder:
        def __init__(self, v):
            self.v = v

    register_pytree_with_keys(Holder, lambda h: (((GetAttrKey(name), h.v),), None), lambda _, ch: Holder(*ch))
    return Holder(value), Holder


def test_a_field_name_with_an_override_and_a_newline_draws_no_fake_row():
    name = "w\u202e\nfake"
    tree, Holder = _field_tree(name, jnp.ones(2))
    # the path stays JAX's own keystr (it is the selection's identity)
    assert jax.tree_util.keystr(jax.tree_util.tree_flatten_with_path(tree)[0][0][0]) == "." + name
    text = pytree_lab.describe(tree).text()
    assert text.splitlines() == [
        "params",
        "└── w\\u202e\\nfake: float32[2]",
        "1 leaf, 2 numerical parameter values",
    ]
    diagram = pytree_lab.PytreeDiagram(tree)
    assert "\u202e" not in diagram.text() and len(diagram.text().splitlines()) == 3
    row = next(r for r in diagram.rows if r["p"] == "." + name)
    assert row["l"] == "w\\u202e\\nfake"
    found = pytree_lab.diagnose(tree, Holder(jnp.ones(3)))
    assert found.kind == "shape" and found.path == "." + name
    assert found.message.startswith(".w\\u202e\\nfake has shape (2,) in params but (3,)")
    assert "\n" not in found.message and "\u202e" not in found.message


def test_dict_keys_with_control_characters_are_shown_escaped_everywhere():
    key = "ok\u202e\nfake"
    found = pytree_lab.diagnose({key: 1.0, "b": 2.0}, {"b": 2.0})
    assert found.message.startswith("The gradient tree is missing ['ok\\u202e\\nfake'], which params has")
    text = pytree_lab.describe({key: 1.0}).text()
    assert text.splitlines()[1] == "└── 'ok\\u202e\\nfake': float32[]"


def test_right_to_left_keys_are_isolated_in_sentences():
    assert isolate_rtl("وزن[0]") == "\u2068وزن\u2069[0]"
    assert isolate_rtl("['وزن ثقيل']['w']") == "['\u2068وزن ثقيل\u2069']['w']"
    assert isolate_rtl("['שלום']") == "['\u2068שלום\u2069']"
    assert isolate_rtl("['weight']") == "['weight']"
    found = pytree_lab.diagnose({"وزن": jnp.ones(2)}, {"وزن": jnp.ones(3)})
    assert found.message.startswith("['\u2068وزن\u2069'] has shape (2,) in params but (3,)")
