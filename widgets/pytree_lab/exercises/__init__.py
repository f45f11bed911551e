"""Generic exercise tools: grading helpers, guarded runs of student code, the evidence log and
the check / prediction / quiz / evidence widgets. No course lives here (see pytree_lab.course):
a course uses only the names in `__all__`.
"""

from __future__ import annotations

from ..formatting import fmt_number as fmt_num  # 8, 0.1235, 0 for -0.0
from ._check import CheckContext, Grader, cell_python, check
from ._grading import (
    Case,
    CheckResult,
    Exercise,
    Outcome,
    _all_finite as all_finite,
    _as_number_array as as_number_array,
    _close as close,
    _fmt as fmt,
    _fmt_shape as fmt_shape,
    _grade_number as grade_number,
    _grade_tree as grade_tree,
    _TreeSpec as TreeSpec,
    _type_name as type_name,
    bind_tools,
    is_unanswered,
    tools,
    tree_problem,
)
from ._guard import describe_failure, exception_text, notes_for, run_guarded
from .cells import last_run, register_magic
from .evidence import (
    Evidence,
    aligned_trees,
    clear_evidence,
    default_evidence,
    record_output,
    save_evidence,
)
from .widgets import CheckButton, EvidenceButton, PredictionPrompt, Quiz

__all__ = [
    "Case",
    "CheckButton",
    "CheckContext",
    "CheckResult",
    "Evidence",
    "EvidenceButton",
    "Exercise",
    "Grader",
    "Outcome",
    "PredictionPrompt",
    "Quiz",
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
    "tools",
    "tree_problem",
    "type_name",
]
