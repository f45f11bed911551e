"""The `pytree-lab` command.

pytree-lab nbgrader OUTDIR [--content DIR] [--solutions DIR]   the course as an nbgrader course directory
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys


def _refusal(outdir: str) -> str | None:
    """One sentence on why OUTDIR cannot hold a new course directory, or None."""
    if not outdir.strip():
        return "OUTDIR is empty: name the folder to write the course directory into."
    path = pathlib.Path(outdir).expanduser()
    if path.resolve() == pathlib.Path(path.resolve().anchor):
        return f"{outdir} is the root of the file system: choose a folder of its own for the course directory."
    if path.exists() and not path.is_dir():
        return f"{outdir} is a file, not a folder: choose a folder for the course directory."
    return None


def _nbgrader(args) -> int:
    if args.solutions:  # where reference_solution (and so the assignment's source) reads them
        os.environ["PYTREE_LAB_SOLUTIONS"] = str(pathlib.Path(args.solutions).expanduser().resolve())
    from .assignment import ASSIGNMENT, write_course
    from .catalogue import EXERCISES
    from .exercises.common import reference_solution

    missing = ", ".join(f"{i}.py" for i, ex in EXERCISES.items() if ex.graded and not reference_solution(i))
    where = os.environ.get("PYTREE_LAB_SOLUTIONS") or "this install (a package ships none)"
    where += ": name the instructor's folder of them with --solutions DIR or PYTREE_LAB_SOLUTIONS."
    refusal = _refusal(args.outdir) or (missing and f"no reference solution ({missing}) in {where}")
    if refusal:
        print(f"pytree-lab nbgrader: {refusal}", file=sys.stderr)
        return 2
    try:
        made = write_course(args.outdir, content=args.content, assignment=ASSIGNMENT)
    except OSError as exc:  # a FileExistsError (or no file named) is write_course's own sentence
        own = isinstance(exc, FileExistsError) or exc.filename is None
        why = f"cannot write into {args.outdir} ({exc.strerror or exc}): choose a folder you can write to."
        print(f"pytree-lab nbgrader: {exc if own else why}", file=sys.stderr)
        return 2
    print(f"wrote {made['config']}")
    for path in made["notebooks"]:
        ids = made["exercises"][path.name]
        print(
            f"wrote {path} ({len(ids)} graded exercise{'s' if len(ids) != 1 else ''}: "
            f"{', '.join(ids)}; {sum(EXERCISES[i].points for i in ids):g} points)"
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
    content = "the folder holding the course notebooks (default: the ones installed with the package)"
    grader.add_argument("--content", metavar="DIR", help=content)
    solutions = "the instructor's folder of reference solutions, <exercise id>.py (default: $PYTREE_LAB_SOLUTIONS"
    grader.add_argument("--solutions", metavar="DIR", help=f"{solutions}, else a checkout's course_source/solutions)")
    grader.set_defaults(run=_nbgrader)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
