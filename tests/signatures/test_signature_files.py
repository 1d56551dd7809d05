"""Every signature file is named after its class (issue 18, item 6): one name for both, one signature per file."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import dspy

import memento.signatures as signatures

#: files that hold no signature class, with what they hold instead
NOT_SIGNATURES = {
    "final_answer": "answer_signature(): builds each task's final-answer signature",
    "rule_op": "RuleOp: the pydantic operation both rule distillers return",
}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(signatures.__path__) if not m.name.startswith("_"))


def test_every_signature_file_is_named_after_its_one_class():
    seen: list[str] = []
    for name in _modules():
        module = importlib.import_module(f"memento.signatures.{name}")
        classes = [
            obj
            for obj in vars(module).values()
            if inspect.isclass(obj) and issubclass(obj, dspy.Signature) and obj.__module__ == module.__name__
        ]
        if name in NOT_SIGNATURES:
            assert not classes, f"{name}.py is listed as holding no signature but defines {classes}"
            continue
        assert len(classes) == 1, f"{name}.py must define exactly one signature, found {[c.__name__ for c in classes]}"
        cls = classes[0]
        assert _snake(cls.__name__) == name, (
            f"{name}.py holds {cls.__name__}: rename the file {_snake(cls.__name__)}.py"
        )
        assert cls.__name__ in module.__all__
        assert getattr(signatures, cls.__name__) is cls, f"{cls.__name__} is not exported by memento.signatures"
        seen.append(cls.__name__)
    assert "AssessCoverage" in seen and "CheckCandidate" in seen and "CurateMemoryBlind" in seen
    exported = {n for n in signatures.__all__ if inspect.isclass(getattr(signatures, n))}
    assert exported == set(seen)  # nothing exported that lives elsewhere, nothing defined and not exported
