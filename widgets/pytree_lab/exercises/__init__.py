"""Generic exercise tools: grading helpers, guarded runs of student code, the evidence log and
the check / prediction / quiz / evidence widgets. No course lives here (see pytree_lab.course):
a course uses only the names in `__all__`.
"""

from __future__ import annotations

from . import _grading
from ._check import CheckContext as CheckContext, Grader as Grader, cell_python as cell_python, check as check
from ._grading import (
    CheckResult as CheckResult,
    Exercise as Exercise,
    Outcome as Outcome,
    _all_finite as all_finite,
    _as_number_array as as_number_array,
    _close as close,
    _fmt as fmt,
    _fmt_num as fmt_num,
    _fmt_shape as fmt_shape,
    _grade_number as grade_number,
    _grade_tree as grade_tree,
    _TreeSpec as TreeSpec,
    _type_name as type_name,
    bind_tools as bind_tools,
    differentiates as differentiates,
    is_unanswered as is_unanswered,
    tools as tools,
    tree_problem as tree_problem,
)
from ._guard import (
    Guarded as Guarded,
    TimeBudgetExceeded as TimeBudgetExceeded,
    describe_failure as describe_failure,
    exception_text as exception_text,
    notes_for as notes_for,
    run_guarded as run_guarded,
    watch_modules as watch_modules,
)
from ._integrity import seal_mapping as seal_mapping
from .cells import last_run as last_run, register_magic as register_magic
from .evidence import (
    Evidence as Evidence,
    SavedEvidence as SavedEvidence,
    aligned_trees as aligned_trees,
    clear_evidence as clear_evidence,
    default_evidence as default_evidence,
    record_output as record_output,
    save_evidence as save_evidence,
)
from .widgets import (
    CheckButton as CheckButton,
    EvidenceButton as EvidenceButton,
    PredictionPrompt as PredictionPrompt,
    Quiz as Quiz,
)

# the checker's own functions are put back when a student's code replaces them
watch_modules(_grading)

__all__ = [
    "CheckButton",
    "CheckContext",
    "CheckResult",
    "Evidence",
    "EvidenceButton",
    "Exercise",
    "Grader",
    "Guarded",
    "Outcome",
    "PredictionPrompt",
    "Quiz",
    "SavedEvidence",
    "TimeBudgetExceeded",
    "TreeSpec",
    "aligned_trees",
    "all_finite",
    "as_number_array",
    "bind_tools",
    "cell_python",
    "check",
    "clear_evidence",
    "close",
    "default_evidence",
    "describe_failure",
    "differentiates",
    "exception_text",
    "fmt",
    "fmt_num",
    "fmt_shape",
    "grade_number",
    "grade_tree",
    "is_unanswered",
    "last_run",
    "notes_for",
    "record_output",
    "register_magic",
    "run_guarded",
    "save_evidence",
    "seal_mapping",
    "tools",
    "tree_problem",
    "type_name",
    "watch_modules",
]
