"""The type check CI runs (`mypy`, configured in pyproject.toml: the package, tests/ and bench/) passes, so the full
suite catches a type error before a landing does. The cache is the checkout's `.mypy_cache/` (the one CI's `mypy`
step and a developer's `mypy` fill): a first run reads torch's and numpy's annotations (minutes), later runs take
seconds.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_configuration_has_no_blanket_ignores() -> None:
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert mypy["files"] == ["memento", "tests", "bench"]  # the package, its tests and its benches
    assert "ignore-without-code" in mypy["enable_error_code"] and mypy["warn_unused_ignores"] is True
    assert not {"ignore_errors", "ignore_missing_imports", "follow_imports"} & set(mypy)
    strict = {"disallow_untyped_defs", "warn_return_any", "disallow_any_generics"}
    overrides = mypy.get("overrides", [])
    # the package is held to the three stricter flags (tests/ and bench/ keep the base settings)
    assert [o for o in overrides if o["module"] == ["memento", "memento.*"]] == [
        {"module": ["memento", "memento.*"]} | dict.fromkeys(strict, True)
    ]
    for override in overrides:
        if override["module"] == ["memento", "memento.*"]:
            continue
        assert set(override) == {"module", "ignore_missing_imports"}, override  # only named untyped libraries
        assert all(not m.startswith("memento") for m in override["module"])


def test_mypy_reports_no_error() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert proc.stdout.startswith("Success: no issues found"), proc.stdout
