"""Write tests/slow_tests.txt: the kernel-tier tests that take a second or more.

    .venv/bin/python -m pytest -m kernel -n 2 --durations=0 --durations-min=0.5 > /tmp/durations.log
    .venv/bin/python tools/slow_tests.py /tmp/durations.log

tests/conftest.py marks the listed tests `slow`; `make test-fast` leaves them out. A test's
setup, call and teardown are added up. The list only sorts tests into tiers: a test missing from
it makes the fast tier slower, and `make test` runs every test whatever the list says.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "slow_tests.txt"
SLOW_S = 1.0
HEADER = """\
# Kernel-tier tests that take a second or more: tests/conftest.py marks them `slow`, and
# `make test-fast` leaves them out. One pytest node id per line. Written by tools/slow_tests.py
# from a `pytest --durations=0` run on a 2-core machine; a test missing here only makes the fast
# tier slower, and `make test` runs every test whatever this list says.
"""
_LINE = re.compile(r"^(\d+(?:\.\d+)?)s (?:call|setup|teardown)\s+(tests/\S.*?)\s*$")


def slow_tests(log: str, seconds: float = SLOW_S) -> list[str]:
    """Node ids whose setup + call + teardown in `log` (pytest's durations) reach `seconds`."""
    total: dict[str, float] = defaultdict(float)
    for line in log.splitlines():
        m = _LINE.match(line)
        if m:
            total[m[2]] += float(m[1])
    return sorted(node for node, t in total.items() if t >= seconds)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    nodes = slow_tests(Path(argv[0]).read_text(encoding="utf-8"))
    OUT.write_text(HEADER + "".join(f"{n}\n" for n in nodes), encoding="utf-8")
    print(f"{len(nodes)} slow tests written to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
