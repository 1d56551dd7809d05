"""Long modules split by concept (issue 27 item 3): every public name still imports from its old module, as the
same object its new home defines, and each new module says what it holds (a docstring and an ``__all__``)."""

from __future__ import annotations

import importlib

import pytest

#: old module -> {public name: the module that now defines it}
MOVED: dict[str, dict[str, str]] = {
    "memento.web.fetcher": {
        "Fetcher": "memento.web.fetcher",
        "Page": "memento.web.page",
        "ALLOWED_CONTENT_TYPES": "memento.web.http_answer",
        "DEFAULT_USER_AGENT": "memento.web.fetcher",
    },
    "memento.tasks.pii": {
        "PartyAnonymizer": "memento.tasks.pii",
        "PartySegment": "memento.tasks.party_parser",
        "Party": "memento.tasks.party_parser",
        "parse_party": "memento.tasks.party_parser",
        "Leak": "memento.tasks.party_leaks",
        "find_leaks": "memento.tasks.party_leaks",
        "leak_terms": "memento.tasks.party_leaks",
        "LEAK_STOPWORDS": "memento.tasks.party_leaks",
        "court_spans": "memento.tasks.court_names",
        "GENERIC_TOKENS": "memento.tasks.party_vocabulary",
        "ORG_TOKENS": "memento.tasks.party_vocabulary",
        "ORG_ABBREVIATIONS": "memento.tasks.party_vocabulary",
    },
    "memento.optimize.memento_trainer": {
        "MementoTrainer": "memento.optimize.memento_trainer",
        **dict.fromkeys(
            [
                "PHASES",
                "example_id",
                "forward_run",
                "RunRecord",
                "RunDigest",
                "RuleVote",
                "ConsolidationPlan",
                "ReflectionPlan",
                "BatchCheckpoint",
            ],
            "memento.optimize.trainer_records",
        ),
    },  # fmt: skip
    "memento.memory.trajectory_bank": {
        "TrajectoryBank": "memento.memory.trajectory_bank",
        **dict.fromkeys(
            [
                "BankPolicy",
                "BankStats",
                "BankDiskUsage",
                "RetrievedTrajectory",
                "BankHit",
                "BankEntry",
                "item_id",
                "StagedRow",
                "TrajectoryBankError",
                "TrajectoryBankFrozenError",
            ],
            "memento.memory.trajectory_records",
        ),
        **dict.fromkeys(["bank_exists", "disk_usage", "SCHEMA_VERSION"], "memento.memory.trajectory_storage"),
    },  # fmt: skip
    "memento.memory.memento_memory": {
        "MementoMemory": "memento.memory.memento_memory",
        "open_memory": "memento.memory.memento_memory",
        "MemoryView": "memento.memory.memory_view",
        **dict.fromkeys(["StoreDiff", "MemoryDiff"], "memento.memory.memory_diff"),
        **dict.fromkeys(
            [
                "MemoryBudgets",
                "STORES",
                "PAPER_NAMES",
                "RelevanceStage",
                "budgets_from_settings",
                "PAPER_CONTEXT_SHARE",
            ],
            "memento.memory.memory_budgets",
        ),
    },  # fmt: skip
    "memento.memory.case_bank": {
        "CaseBank": "memento.memory.case_bank",
        "open_case_bank": "memento.memory.case_bank",
        "GATE_FILE": "memento.memory.case_gate",
        "DB_NAME": "memento.memory.case_rows",
        "CaseBankError": "memento.memory.case_rows",
    },
    "memento.memory.case_store": {
        "CaseStore": "memento.memory.case_store",
        **dict.fromkeys(
            ["DB_NAME", "CaseBankError", "bank_exists", "content_items", "read_embedder_info"],
            "memento.memory.case_rows",
        ),
    },
    "memento.memory.sqlite_store": {
        "SQLiteStore": "memento.memory.sqlite_store",
        **dict.fromkeys(["Transaction", "VersionInfo", "ItemRow"], "memento.memory.store_transaction"),
        **dict.fromkeys(
            ["fts_query", "estimate_tokens", "rule_weight", "index_columns", "item_date"], "memento.memory.item_columns"
        ),
        **dict.fromkeys(["FTS_STORES", "DB_NAME", "memory_exists", "SCHEMA_VERSION"], "memento.memory.memory_schema"),
    },  # fmt: skip
    "memento.optimize.jitmem_stream": {
        "stream": "memento.optimize.jitmem_stream",
        "run_orderings": "memento.optimize.jitmem_stream",
        **dict.fromkeys(["StreamItem", "StreamResult"], "memento.optimize.stream_records"),
    },
    "memento.programs.case_based_agent": {
        "CaseBasedAgent": "memento.programs.case_based_agent",
        **dict.fromkeys(["PassResult", "fit_cases"], "memento.programs.case_training"),
        **dict.fromkeys(["render_cases", "render_tool_plan"], "memento.programs.case_rendering"),
    },
}

#: the modules the splits created
NEW_MODULES = sorted(
    {home for names in MOVED.values() for home in names.values()}
    | {"memento.web.address_policy", "memento.web.robots_rules", "memento.web.request_deadline"}
    | {"memento.web.page_extraction", "memento.tasks.name_patterns", "memento.tasks.name_spelling"}
    | {"memento.optimize.trainer_checkpoints", "memento.optimize.run_digests", "memento.optimize.distiller_calls"}
    | {"memento.optimize.rule_votes", "memento.optimize.consolidation_phase", "memento.optimize.reflection_phase"}
    | {"memento.memory.trajectory_index", "memento.memory.page_store", "memento.memory.trajectory_eligibility"}
    | {"memento.memory.trajectory_items", "memento.memory.case_kernel", "memento.optimize.stream_journal"}
)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_public_names_still_import_from_the_old_module(old: str) -> None:
    module = importlib.import_module(old)
    assert set(MOVED[old]) <= set(module.__all__), sorted(set(MOVED[old]) - set(module.__all__))
    for name, home in MOVED[old].items():
        assert getattr(module, name) is getattr(importlib.import_module(home), name), name


@pytest.mark.parametrize("name", NEW_MODULES)
def test_each_new_module_has_a_docstring_and_exports_what_it_lists(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__doc__ and len(module.__doc__.strip()) > 40, name
    assert module.__all__, name
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names {missing}, which it does not define"
