"""memento.records: what a run leaves behind: the LM call log (lm_log), usage and cost per stage (usage), what
produced a result (provenance), MLflow tracking (tracking), the leakage audit (leakage) and the HTML reports
(html_report, html_trajectory).

The main name of each module imports from here, lazily; the others from their modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memento.utils.lazy_exports import homes_by_module, lazy_exports

if TYPE_CHECKING:
    from memento.records.html_report import write_report
    from memento.records.leakage import LeakageAudit
    from memento.records.lm_log import LMCallLog
    from memento.records.provenance import run_key
    from memento.records.tracking import MLflowTracker
    from memento.records.usage import UsageMeter

_HOMES = homes_by_module(
    {
        "lm_log": ("LMCallLog",),
        "usage": ("UsageMeter",),
        "provenance": ("run_key",),
        "tracking": ("MLflowTracker",),
        "leakage": ("LeakageAudit",),
        "html_report": ("write_report",),
    }
)

# fmt: off
__all__ = [
    "LMCallLog", "LeakageAudit", "MLflowTracker", "UsageMeter", "run_key", "write_report",
]
# fmt: on

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
