"""Generic exercise tools: grading helpers, guarded runs of student code, the evidence log and
the check / prediction / quiz / evidence widgets. No course lives here (see pytree_lab.course).
"""

from __future__ import annotations

from ._grading import CheckResult as CheckResult, Exercise as Exercise, Outcome as Outcome, grade_answer as grade_answer
from ._guard import Guarded as Guarded, TimeBudgetExceeded as TimeBudgetExceeded, run_guarded as run_guarded
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

__all__ = [
    "CheckButton",
    "CheckResult",
    "Evidence",
    "EvidenceButton",
    "Exercise",
    "Guarded",
    "Outcome",
    "PredictionPrompt",
    "Quiz",
    "SavedEvidence",
    "aligned_trees",
    "TimeBudgetExceeded",
    "clear_evidence",
    "default_evidence",
    "grade_answer",
    "record_output",
    "run_guarded",
    "save_evidence",
]
