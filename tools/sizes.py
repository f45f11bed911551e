"""The repository's shipped Python, measured the honest way (make lint prints it): lines and
tokens per package and in all, so a move between packages is never read as a cut. Tokens are
Python's own (`tokenize`), comments, blank lines and indentation left out."""

from __future__ import annotations

import io
import pathlib
import sys
import tokenize

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = {
    "the library (widgets/pytree_lab)": "widgets/pytree_lab",
    "the Lite engine (packages/pytree-lab-lite)": "packages/pytree-lab-lite/pytree_lab_lite",
    "the site's kernel glue (lite_build/kernel)": "lite_build/kernel/pytree_lab_site",
}
SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}


def measure(folder: pathlib.Path) -> tuple[int, int]:
    lines = tokens = 0
    for path in sorted(folder.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines += len(text.splitlines())
        tokens += sum(t.type not in SKIP for t in tokenize.generate_tokens(io.StringIO(text).readline))
    return lines, tokens


def main() -> int:
    total = [0, 0]
    for name, folder in PACKAGES.items():
        lines, tokens = measure(ROOT / folder)
        total[0], total[1] = total[0] + lines, total[1] + tokens
        print(f"{name}: {lines:,} lines, {tokens:,} tokens")
    print(f"shipped Python in all: {total[0]:,} lines, {total[1]:,} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
