"""The widgets' ES modules type-check as they ship, without a build step (issue 21, section 3).

Every static/*.js starts with `// @ts-check`, declares its `Model` (the synced traits) as a JSDoc
typedef and applies it to its render function through `@anywidget/types`
(`/** @type {import("@anywidget/types").Render<Model>} */`). TypeScript and @anywidget/types
are pinned by tools/jscheck/package-lock.json (`make js-deps`, run by `make test`: npm ci, then
offline); tools/jscheck/tsconfig.json checks with `strict`. `tsc --noEmit` must exit 0 with no
error, and the check is shown to bite: a module that reads a trait its Model lacks, or uses a
value that may be null, fails it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STATIC = ROOT / "widgets" / "pytree_lab" / "static"
JSCHECK = ROOT / "tools" / "jscheck"
TSC = JSCHECK / "node_modules" / ".bin" / "tsc"
# the widget modules; a file starting with "_" is a script every module gets in front of its own
# text (page.py): its functions are globals to tsc, as they are to the module at run time
MODULES = sorted(m for m in STATIC.glob("*.js") if not m.name.startswith("_"))
SHARED = sorted(m for m in STATIC.glob("*.js") if m.name.startswith("_"))
RENDER_TYPE = re.compile(r'/\*\* @type \{import\("@anywidget/types"\)\.Render<Model>\} \*/\n(async )?function render\(')


def run_tsc(project: Path) -> subprocess.CompletedProcess:
    if not TSC.exists():
        pytest.fail(f"{TSC} is missing: run `make js-deps` (npm ci in tools/jscheck)", pytrace=False)
    node = shutil.which("node")
    if node is None:
        pytest.fail(
            "node is missing: the JS type check needs Node.js (the README's test command installs it)", pytrace=False
        )
    return subprocess.run(
        [str(TSC), "--noEmit", "--pretty", "false", "-p", str(project)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )


def test_the_pins_are_locked_and_exact():
    package = json.loads((JSCHECK / "package.json").read_text())
    lock = json.loads((JSCHECK / "package-lock.json").read_text())
    pins = package["devDependencies"]
    assert set(pins) == {"typescript", "@anywidget/types"}
    for name, version in pins.items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), (name, version)  # exact, not a range
        locked = lock["packages"][f"node_modules/{name}"]
        assert locked["version"] == version and locked["integrity"].startswith("sha512-")


def test_every_module_is_checked_against_its_model():
    assert [m.name for m in MODULES] == [
        "calculation.js",
        "chart.js",
        "diagram.js",
        "exercises.js",
        "packed.js",
        "play.js",
        "slider.js",
        "slider_proxy.js",
    ]
    for module in MODULES:
        text = module.read_text(encoding="utf-8")
        assert text.startswith("// @ts-check\n"), module.name
        assert re.search(r"@typedef \{[^@]*\} Model\b", text), f"{module.name}: no Model typedef"
        assert len(RENDER_TYPE.findall(text)) == 1, f"{module.name}: render is not typed as Render<Model>"
        # types only: the module never imports anything at run time (no build step, no CDN)
        assert not re.search(r"^\s*import\b", text, re.M), module.name
    # scripts, not widget modules: _shared.js goes into every module, _replay.js into the replay page
    assert [m.name for m in SHARED] == ["_replay.js", "_shared.js"]
    for script in SHARED:  # a script: no import or export, so its declarations are global
        text = script.read_text(encoding="utf-8")
        assert text.startswith("// @ts-check\n") and not re.search(r"^\s*(import|export)\b", text, re.M)


def test_tsc_reports_no_error():
    listed = run_tsc_list()
    assert {p.name for p in listed if p.parent == STATIC} == {m.name for m in MODULES + SHARED}
    result = run_tsc(JSCHECK)
    output = result.stdout + result.stderr
    assert "error TS" not in output, output
    assert result.returncode == 0, output


def run_tsc_list() -> list[Path]:
    """The files tsc checks under the project (a tsconfig whose include matched nothing would pass)."""
    if not TSC.exists():
        pytest.fail(f"{TSC} is missing: run `make js-deps` (npm ci in tools/jscheck)", pytrace=False)
    result = subprocess.run(
        [str(TSC), "--listFilesOnly", "-p", str(JSCHECK)], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return [Path(line).resolve() for line in result.stdout.splitlines() if line.strip()]


@pytest.mark.parametrize(
    "old, new, error",
    [
        # a trait the Model does not have
        (
            'const path = model.get("path") || model.get("description");',
            'const path = model.get("paht") || model.get("description");',
            "TS2345",
        ),
        # `value` is null for a non-finite number: using it as a number is refused
        ('if (v !== null) input.value = String(v);', 'input.value = v.toFixed(2);', "TS18047"),
    ],
)
def test_tsc_catches_a_broken_module(tmp_path, old, new, error):
    source = (STATIC / "slider.js").read_text(encoding="utf-8")
    assert source.count(old) == 1
    (tmp_path / "slider.js").write_text(source.replace(old, new), encoding="utf-8")
    (tmp_path / "tsconfig.json").write_text(
        json.dumps(
            {
                "extends": str(JSCHECK / "tsconfig.json"),
                "include": [str(tmp_path / "slider.js")],
            }
        )
    )
    result = run_tsc(tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert re.search(rf"slider\.js\(\d+,\d+\): error {error}", output), output
