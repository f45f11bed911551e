"""The screenshots in the documentation, drawn and checked by the browser tests, copied into docs/.

    .venv/bin/python tools/docs_images.py

Runs the browser tests that take them (each writes its PNGs to artifacts/screenshots/, light and
dark) and, when every one passed, copies each picture the docs show into its place under docs/.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "artifacts" / "screenshots"

# the picture under docs/ <- the test's screenshot
IMAGES = {
    "explorer.png": "lecture-xor-mlp-adam-light.png",
    "img/presenter-1440x900.png": "lecture-xor-presenter-1440x900-light.png",
    "img/lecture-xor-mlp-adam.png": "lecture-xor-mlp-adam-light.png",
    "img/shapes-mlp-2-8-2.png": "shapes-mlp-2-8-2-1440-light-top.png",
    "img/loss-log-scale.png": "replay-log-scale-light.png",
    "img/replay-page-light.png": "export-replay-light.png",
    "img/replay-page-dark.png": "export-replay-dark.png",
    "img/optimizer-comparison.png": "compare-light.png",
}
TESTS = [
    "tests/browser/test_browser_lecture_layout.py::test_the_lecture_demos_fit_a_projected_screen",
    "tests/browser/test_browser_lecture_layout.py::test_presenter_mode_fits_one_screen_with_no_text_over_another",
    "tests/browser/test_browser_shapes.py::test_a_matrix_is_drawn_in_its_own_shape",
    "tests/browser/test_browser_replay.py::test_the_log_scale_box_puts_the_loss_line_on_a_log_axis_and_back",
    "tests/browser/test_browser_export.py::test_a_played_run_replays_offline_with_the_record_s_numbers_at_each_step",
    "tests/browser/test_browser_compare.py::test_step_and_play_from_the_page_are_each_optimizers_own_optax_loop",
]


def main() -> int:
    for shot in IMAGES.values():  # only what this run draws is copied
        (SHOTS / shot).unlink(missing_ok=True)
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", *TESTS], cwd=ROOT)
    if tests.returncode:  # a picture from a failed test is not one to show
        return tests.returncode
    for doc, shot in IMAGES.items():
        shutil.copyfile(SHOTS / shot, ROOT / "docs" / doc)
        print(f"docs/{doc} <- artifacts/screenshots/{shot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
