"""What the course's grader takes from a submission: nothing in it is followed outside it, and its
time is the exchange's, not a file the student wrote (docs/grading.md, "What the grader takes").
Outside `pytree_lab.course`, whose import brings JAX: nbgrader's exchange commands import this.

nbgrader copies a submission as the grader, outside any sandbox, and its copies follow symbolic
links (collect's `shutil.copytree`, autograde's `shutil.copy` into autograded/): a link to
`gradebook.db`, to the source notebook or into the grader's home was read as the grader and its
content handed to the student's kernel. Two steps of the course's nbgrader configuration:

- `Collect` (`c.ExchangeFactory.collect`) takes from the exchange's inbound folder, which the
  student's own process writes (mode 777), only folders and regular files of one name; and it
  dates the submission by when its files reached the exchange (`exchange_time`).
- `refuse_unsafe` (autograde's `pre_convert_hook`, before nbgrader's copy) refuses the same in
  `submitted/<student>/<assignment>/` (notebooks copied there by hand): each refused entry is
  moved to `refused/<student>/<assignment>/` beside `submitted/` (the hook is given no handle on
  nbgrader's copy, and `CourseDirectory.ignore` holds name patterns fixed for every student), and
  a refused notebook is not graded: nbgrader then finds it missing and records 0 for its cells.
"""

from __future__ import annotations

import datetime
import os
import shutil
import stat
import tempfile

from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.utils import parse_utc
from traitlets.log import get_logger

__all__ = ["Collect", "exchange_time", "refusal", "refuse_unsafe"]

_SPECIAL = {stat.S_IFIFO: "a named pipe", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a device", stat.S_IFBLK: "a device"}


def refusal(path: str) -> str | None:
    """Why the entry at `path` is not taken from a submission (a phrase), or None: a folder, or a
    regular file with one name. Links are never followed."""
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            return f"a symbolic link (to {os.readlink(path)!r})"
    except OSError as err:
        return f"unreadable ({err.strerror})"
    if stat.S_ISDIR(st.st_mode):
        return None
    if not stat.S_ISREG(st.st_mode):
        return _SPECIAL.get(stat.S_IFMT(st.st_mode), "not a regular file")
    return f"a hard link (one file of {st.st_nlink} names)" if st.st_nlink > 1 else None


def _refused(folder: str) -> list[tuple[str, str]]:
    """(path, why) for every entry under `folder` not taken; a refused folder is not looked into."""
    found = []
    for top, dirs, names in os.walk(folder):  # a link to a folder is listed, never walked
        for name in sorted(dirs + names):
            if why := refusal(os.path.join(top, name)):
                found.append((os.path.join(top, name), why))
        dirs[:] = [d for d in dirs if not refusal(os.path.join(top, d))]
    return found


def exchange_time(folder: str) -> datetime.datetime:
    """When the files of `folder` last changed (UTC): the latest inode change time (ctime) of the
    folder and of everything in it. Every write, rename, link or chmod sets it to the clock's
    time, and no user can set it back (`touch` and `cp -p` set the modification time only)."""
    latest = os.lstat(folder).st_ctime
    for top, dirs, names in os.walk(folder):
        latest = max([latest, *(os.lstat(os.path.join(top, name)).st_ctime for name in dirs + names)])
    return datetime.datetime.fromtimestamp(latest, datetime.UTC).replace(tzinfo=None)


class Collect(ExchangeCollect):
    """nbgrader's collect, taking from each inbound submission folder its folders and regular files
    of one name only (a link, hard link or special file is left in the exchange, and the log names
    it), and writing `timestamp.txt` as the later of the student's timestamp and `exchange_time`."""

    def do_copy(self, src, dest, log=None):
        if why := refusal(src):
            self.log.error("%s is %s: not collected.", src, why)
            return
        with tempfile.TemporaryDirectory(dir=os.path.dirname(dest)) as scratch:
            taken = os.path.join(scratch, "taken")

            def skip(folder, names):
                refused = {n: why for n in names if (why := refusal(os.path.join(folder, n)))}
                for name, why in refused.items():
                    self.log.warning("%s is %s: not collected.", os.path.join(folder, name), why)
                return list(refused)

            try:  # into the grader's own folder, links as links; what changed since the look goes
                shutil.copytree(src, taken, symlinks=True, ignore=skip)
                for path, _ in _refused(taken):
                    os.remove(path)
            except (OSError, shutil.Error) as err:
                self.log.error("%s is not collected: %s.", src, err)
                return
            super().do_copy(taken, dest, log)  # nbgrader's own: its ignore, include and size rules
        arrived = exchange_time(src)  # after the copy: a change during it counts too
        stamp = os.path.join(dest, "timestamp.txt")
        try:
            with open(stamp, encoding="utf-8") as f:
                claimed = parse_utc(f.read().strip())
        except (OSError, ValueError, OverflowError):
            claimed = None
        if claimed is None or arrived - claimed > datetime.timedelta(minutes=1):
            self.log.warning("%s: timestamp.txt says %s, its files reached the exchange at %s.", src, claimed, arrived)
        with open(stamp, "w", encoding="utf-8") as f:
            f.write(max(arrived, claimed or arrived).strftime("%Y-%m-%d %H:%M:%S.%f UTC"))


def refuse_unsafe(notebooks: list, **_) -> None:
    """autograde's pre_convert_hook, called once per submission folder with its notebooks' paths
    (nbgrader's `student` and `assignment` are its globs, `*`): every symbolic link, hard-linked
    file and special file in the folder (or the folder itself, or the student's folder, if it is
    a link) is moved to `refused/<student>/<assignment>/`, three folders above the submission
    (beside `submitted/` in nbgrader's layout), and a refused notebook leaves `notebooks`: it is
    not graded. One log line each. It never raises (nbgrader would log it at info level and go
    on): if a refused entry cannot be moved, no notebook of the submission is graded."""
    log = get_logger()
    if not notebooks:
        return
    folder = os.path.dirname(notebooks[0])
    student, assignment = os.path.basename(os.path.dirname(folder)), os.path.basename(folder)
    quarantine = os.path.normpath(os.path.join(folder, *[os.pardir] * 3, "refused", student, assignment))
    try:
        links = [p for p in (os.path.dirname(folder), folder) if os.path.islink(p)]
        for path, why in [(links[0], refusal(links[0]))] if links else _refused(folder):
            target = quarantine if links else os.path.join(quarantine, os.path.relpath(path, folder))
            while os.path.lexists(target):
                target += "~"
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.move(path, target)  # a rename; across file systems a link is moved as a link
            what = "not graded" if links or path in notebooks else "not copied for grading"
            notebooks[:] = [] if links else [nb for nb in notebooks if nb != path]
            log.warning("%s's %s: %s is %s: %s; it is now %s.", student, assignment, path, why, what, target)
    except Exception as err:  # noqa: BLE001 - the hook must not raise
        notebooks.clear()
        log.error("%s's %s is not graded: a refused entry could not be moved (%s).", student, assignment, err)
