"""What tools/screenshots.py and tools/screenshots_exercises.py share: a real JupyterLab and
Chromium, one notebook run in the page, one PNG per widget output and theme, and the command line.

Each script names its cells, which cell outputs to save under which name, and anything more to
wait for or save; `take` does the rest with the browser tests' harness, reused as is.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from browser import harness  # noqa: E402  (the browser tests' harness, reused as is)

THEMES = ((harness.LIGHT, "light"), (harness.DARK, "dark"))


def take(
    out: Path,
    *,
    notebook: str,
    cells: list[str],
    shots: dict[int, str],
    wait_for: str,
    width: int,
    height: int = 1000,
    scale: float = 1.0,
    ready: Callable | None = None,
    more: Callable | None = None,
) -> list[Path]:
    """Run `cells` as `notebook` in JupyterLab and save `out/<name>-<theme>.png` for each
    `shots` entry (cell output index -> name), in the light theme and then the dark one.

    `ready(nb, outputs)` waits for whatever the widgets draw late, once, before the first shot;
    `more(nb, outputs, tag)` saves further shots in each theme and returns their paths.
    A widget taller than the `width` x `height` viewport is cut off at its bottom edge.
    """
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    saved: list[Path] = []
    base = Path(tempfile.mkdtemp(prefix="pytree-lab-shots-"))
    server = harness.start_lab(base)
    try:
        with sync_playwright() as pw:
            browser = harness.launch_chromium(pw)
            try:
                page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=scale)
                harness.open_lab(page, server)
                nb = harness.open_notebook(page, server, notebook, cells, wait_for=wait_for)
                try:
                    outputs = nb.panel.locator(".jp-CodeCell .jp-OutputArea")
                    if ready is not None:
                        ready(nb, outputs)
                    for theme, tag in THEMES:
                        harness.set_theme(page, theme)
                        page.wait_for_timeout(500)  # bqplot restyles its axes after the theme change
                        for index, name in shots.items():
                            target = out / f"{name}-{tag}.png"
                            outputs.nth(index).screenshot(path=str(target))
                            saved.append(target)
                        if more is not None:
                            saved += more(nb, outputs, tag)
                    harness.set_theme(page, harness.LIGHT)
                finally:
                    nb.close()
            finally:
                browser.close()
    finally:
        server.stop()
        harness.remove_tree(base)
    return saved


def main(argv: list[str] | None, description: str, take_shots: Callable[[Path, float], list[Path]]) -> int:
    """The command line both scripts take: `--out DIR` and `--scale N`; prints each PNG's path."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", type=Path, default=ROOT / "artifacts" / "screenshots")
    parser.add_argument("--scale", type=float, default=1.0, help="device pixel ratio (2 for close inspection)")
    args = parser.parse_args(argv)
    for path in take_shots(args.out, args.scale):
        print(path)
    return 0
