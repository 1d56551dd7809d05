"""optimize/compare.py is a harness over per-family runners (issue 12 item 6): one main class per snake_case file,
every public name still importable from memento.optimize.compare and memento.optimize."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import memento.optimize
from memento.optimize import runners

ROOT = Path(__file__).resolve().parents[2] / "optimize"


def test_every_public_name_is_importable_from_compare_and_optimize() -> None:
    harness = importlib.import_module("memento.optimize.compare")
    expected = {"MethodSpec", "CompareContext", "CompareObserver", "TrainOutcome", "MethodRunner", "ProgramRunner",
                "OptimizerRunner", "MementoRunner", "JitMemRunner", "CaseBankRunner", "CaseMemoryRunner", "compare",
                "parse_methods", "register_runner", "split_examples", "example_id", "WebTally", "Tallied",
                "CountingWeb", "method_cache"}  # fmt: skip
    assert expected <= set(harness.__all__)
    for name in harness.__all__:
        assert getattr(memento.optimize, name) is getattr(harness, name), name
        assert name in memento.optimize.__all__, name
    assert memento.optimize.run_orderings.__module__ == "memento.optimize.jitmem_stream"


def _classes(path: Path) -> list[str]:
    return [n.name for n in ast.parse(path.read_text()).body if isinstance(n, ast.ClassDef) and n.name[0] != "_"]


def test_one_runner_family_per_file_named_after_its_class() -> None:
    files = sorted(p for p in (ROOT / "runners").glob("*.py") if p.name != "__init__.py")
    assert {p.stem for p in files} == {"program_runner", "optimizer_runner", "memento_runner", "jitmem_runner",
                                       "case_bank_runner", "case_memory_runner"}  # fmt: skip
    for path in files:
        camel = "".join(part.capitalize() for part in path.stem.split("_")).replace("Jitmem", "JitMem")
        assert _classes(path) == [camel], path.name
        assert getattr(runners, camel).__module__ == f"memento.optimize.runners.{path.stem}"
    # the harness defines no runner, and is a fraction of the former 1,170 lines
    harness = ROOT / "compare.py"
    assert _classes(harness) == [] and len(harness.read_text().splitlines()) < 600
    assert "CompareContext" in _classes(ROOT / "compare_context.py")
