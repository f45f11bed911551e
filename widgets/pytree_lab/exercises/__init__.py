"""Generic exercise tools: grading helpers, guarded runs of student code, the evidence log and
the check / prediction / quiz / evidence widgets. No course lives here (see pytree_lab.course).
"""

from __future__ import annotations

from ._grading import CheckResult as CheckResult
from ._grading import Exercise as Exercise
from ._grading import Outcome as Outcome
from ._grading import grade_answer as grade_answer
from ._guard import Guarded as Guarded
from ._guard import TimeBudgetExceeded as TimeBudgetExceeded
from ._guard import run_guarded as run_guarded
from .evidence import Evidence as Evidence
from .evidence import SavedEvidence as SavedEvidence
from .evidence import aligned_trees as aligned_trees
from .evidence import clear_evidence as clear_evidence
from .evidence import default_evidence as default_evidence
from .evidence import record_output as record_output
from .evidence import save_evidence as save_evidence
from .widgets import CheckButton as CheckButton
from .widgets import EvidenceButton as EvidenceButton
from .widgets import PredictionPrompt as PredictionPrompt
from .widgets import Quiz as Quiz

__all__ = [
    "CheckButton", "CheckResult", "Evidence", "EvidenceButton", "Exercise", "Guarded", "Outcome",
    "PredictionPrompt", "Quiz", "SavedEvidence", "aligned_trees", "TimeBudgetExceeded", "clear_evidence",
    "default_evidence", "grade_answer", "record_output", "run_guarded", "save_evidence",
]
