"""memento.records: what a run leaves behind: the LM call log (lm_log), usage and cost per stage (usage), the run's
provenance, MLflow tracking, the leakage audit and the HTML report.

Its public names are imported on first use (:mod:`memento.utils.lazy_exports`): importing one module of
the package does not import the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memento.utils.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memento.records.html_report import ReportKind, render_trajectory_page, report_kind, write_report
    from memento.records.leakage import LeakageAudit, StoreAudit, audit_lines
    from memento.records.lm_log import (
        LMCallLog,
        add_retry_listener,
        install_cache_guard,
        install_retry_hook,
        logged_messages,
    )
    from memento.records.provenance import file_sha256, git_commit, key_mismatch, run_key, versions
    from memento.records.tracking import CompareTracking, MLflowTracker
    from memento.records.usage import (
        GENERIC_SIGNATURE,
        JUDGE_ROLE,
        ActivatedCallback,
        ModuleStackCallback,
        NamedPredictors,
        UsageMeter,
        cached_prompt_tokens,
        current_stage,
        name_predictors,
        predictor_name,
    )

_HOMES: dict[str, str] = {
    "ReportKind": "html_report",
    "render_trajectory_page": "html_report",
    "report_kind": "html_report",
    "write_report": "html_report",
    "LeakageAudit": "leakage",
    "StoreAudit": "leakage",
    "audit_lines": "leakage",
    "LMCallLog": "lm_log",
    "add_retry_listener": "lm_log",
    "install_cache_guard": "lm_log",
    "install_retry_hook": "lm_log",
    "logged_messages": "lm_log",
    "file_sha256": "provenance",
    "git_commit": "provenance",
    "key_mismatch": "provenance",
    "run_key": "provenance",
    "versions": "provenance",
    "CompareTracking": "tracking",
    "MLflowTracker": "tracking",
    "ActivatedCallback": "usage",
    "GENERIC_SIGNATURE": "usage",
    "JUDGE_ROLE": "usage",
    "ModuleStackCallback": "usage",
    "NamedPredictors": "usage",
    "UsageMeter": "usage",
    "cached_prompt_tokens": "usage",
    "current_stage": "usage",
    "name_predictors": "usage",
    "predictor_name": "usage",
}

__all__ = [
    "ReportKind",
    "render_trajectory_page",
    "report_kind",
    "write_report",
    "LeakageAudit",
    "StoreAudit",
    "audit_lines",
    "LMCallLog",
    "add_retry_listener",
    "install_cache_guard",
    "install_retry_hook",
    "logged_messages",
    "file_sha256",
    "git_commit",
    "key_mismatch",
    "run_key",
    "versions",
    "CompareTracking",
    "MLflowTracker",
    "ActivatedCallback",
    "GENERIC_SIGNATURE",
    "JUDGE_ROLE",
    "ModuleStackCallback",
    "NamedPredictors",
    "UsageMeter",
    "cached_prompt_tokens",
    "current_stage",
    "name_predictors",
    "predictor_name",
]

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
