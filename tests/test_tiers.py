"""The test tiers (tests/conftest.py) and the slow list tools/slow_tests.py writes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _slow_tests_tool():
    spec = importlib.util.spec_from_file_location("slow_tests_tool", ROOT / "tools" / "slow_tests.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DURATIONS = """\
============================= slowest durations =============================
2.84s setup    tests/test_packaging.py::test_wheel_carries_the_mit_license
1.80s call     tests/test_computed_answers.py::test_accepted[value_and_grad[1]]
0.60s call     tests/test_training.py::test_two_steps
0.50s setup    tests/test_training.py::test_two_steps
0.96s call     tests/test_exercises.py::test_wrong[3-bias first]
0.02s teardown tests/test_packaging.py::test_wheel_carries_the_mit_license
"""


def test_slow_list_holds_slow_tests_and_modules_whose_setup_is_slow():
    tool = _slow_tests_tool()
    assert tool.slow_tests(DURATIONS) == [
        "tests/test_computed_answers.py::test_accepted[value_and_grad[1]]",  # 1.80 s
        "tests/test_packaging.py",  # its setup builds what the whole module uses
        "tests/test_training.py::test_two_steps",  # 0.60 + 0.50 s
    ]  # 0.96 s stays in the fast tier


def _collected(marker: str, path: str) -> list[str]:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", marker, path],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    return [line for line in out.stdout.splitlines() if "::" in line]


def test_the_binder_venv_tests_are_in_the_install_tier_not_the_fast_kernel_tier():
    assert _collected("kernel", "tests/test_binder.py") == []
    assert "tests/test_binder.py::test_binder_environment_runs_the_three_notebooks" in _collected(
        "install", "tests/test_binder.py"
    )
