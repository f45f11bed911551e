"""The `pytree-lab` command.

pytree-lab nbgrader OUTDIR [--content DIR]   write the course as an nbgrader course directory
"""

from __future__ import annotations

import argparse
import sys


def _nbgrader(args) -> int:
    from .assignment import ASSIGNMENT, POINTS, write_course

    try:
        made = write_course(args.outdir, content=args.content, assignment=ASSIGNMENT)
    except (FileExistsError, FileNotFoundError) as exc:
        print(f"pytree-lab nbgrader: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {made['config']}")
    for path in made["notebooks"]:
        ids = made["exercises"][path.name]
        points = sum(POINTS.get(i, 1) for i in ids)
        print(
            f"wrote {path} ({len(ids)} graded exercise{'s' if len(ids) != 1 else ''}: "
            f"{', '.join(ids)}; {points:g} points)"
        )
    print(
        f"next, in {args.outdir}: nbgrader generate_assignment {ASSIGNMENT}; "
        f"then students' work in submitted/<student>/{ASSIGNMENT}/, nbgrader autograde {ASSIGNMENT}, "
        "nbgrader export"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pytree-lab", description="pytree-lab's course tools.")
    commands = parser.add_subparsers(dest="command", required=True)
    grader = commands.add_parser(
        "nbgrader",
        help="write the course as an nbgrader course directory",
        description="Write an nbgrader course directory (nbgrader_config.py, source/pytrees/) with the "
        "course notebooks as an autograded assignment. Nothing in OUTDIR is replaced.",
    )
    grader.add_argument("outdir", metavar="OUTDIR")
    grader.add_argument(
        "--content",
        metavar="DIR",
        default=None,
        help="the folder holding the course notebooks (default: the checkout's content/)",
    )
    grader.set_defaults(run=_nbgrader)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
