"""Write tests/slow_tests.txt: the kernel-tier tests that take a second or more.

A test whose setup alone takes that long is building a fixture its module shares (a wheel, the
docs): the next test would pay it instead, so the whole module is listed (its path, no `::`).

    .venv/bin/python -m pytest -m kernel -n 2 --durations=0 --durations-min=0.3 > /tmp/durations.log
    .venv/bin/python tools/slow_tests.py [--keep-listed] /tmp/durations.log [more logs]

With several logs, a test slow in any of them is listed; `--keep-listed` also keeps what the
list already holds (a test that took a second on a loaded machine stays out of the fast tier
after a quiet run).

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
# `make test-fast` leaves them out. One pytest node id per line (a path alone: the whole module,
# whose shared setup is slow). Written by tools/slow_tests.py
# from a `pytest --durations=0` run on a 2-core machine; a test missing here only makes the fast
# tier slower, and `make test` runs every test whatever this list says.
"""
_LINE = re.compile(r"^(\d+(?:\.\d+)?)s (?:call|setup|teardown)\s+(tests/\S.*?)\s*$")


def slow_tests(log: str, seconds: float = SLOW_S) -> list[str]:
    """Node ids whose setup + call + teardown in `log` (pytest's durations) reach `seconds`, and
    the modules (paths) of tests whose setup alone reaches it."""
    total: dict[str, float] = defaultdict(float)
    modules = set()
    for line in log.splitlines():
        m = _LINE.match(line)
        if m:
            total[m[2]] += float(m[1])
            if " setup " in line and float(m[1]) >= seconds:
                modules.add(m[2].split("::", 1)[0])
    nodes = {node for node, t in total.items() if t >= seconds and node.split("::", 1)[0] not in modules}
    return sorted(nodes | modules)


def main(argv: list[str]) -> int:
    keep = "--keep-listed" in argv
    logs = [a for a in argv if a != "--keep-listed"]
    if not logs:
        print(__doc__, file=sys.stderr)
        return 2
    nodes = set()
    for log in logs:
        nodes.update(slow_tests(Path(log).read_text(encoding="utf-8")))
    if keep and OUT.exists():
        nodes.update(
            line.strip()
            for line in OUT.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")
        )
    # a listed module covers its tests
    nodes = {n for n in nodes if "::" not in n or n.split("::", 1)[0] not in nodes}
    OUT.write_text(HEADER + "".join(f"{n}\n" for n in sorted(nodes)), encoding="utf-8")
    print(f"{len(nodes)} slow tests and modules written to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
