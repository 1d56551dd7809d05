"""Provenance of a run: what produced a results file, and the key that decides whether a rerun may resume it.

:func:`provenance` records the effective settings (secrets masked, each with its source), the model and endpoint
of every LM role, the versions of memento, dspy, litellm and torch, the sha256 of each data file, the git commit
when memento runs from a checkout, the command line, and start/end times. :func:`run_key` is the part that
changes answers (task, data hash, method, metric, models, method settings), without threads, logging, output
paths, keys or endpoints: two runs with the same key may share finished examples.

Example:
    >>> from memento.core.config import load_settings
    >>> from memento.records.provenance import run_key, key_mismatch
    >>> s = load_settings(flags={"lm": "openai/x"})
    >>> a = run_key(s, task="qa", method="react", metric="default", data_sha256="ab")
    >>> key_mismatch(a, run_key(s, task="qa", method="aet", metric="default", data_sha256="ab"))
    "method: 'react' != 'aet'"
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import platform
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memento.core.config import ROLES, Settings
from memento.core.types import utcnow
from memento.utils.scrub import scrub, scrub_data, scrub_url

__all__ = ["file_sha256", "key_mismatch", "provenance", "run_key", "versions", "git_commit"]

# settings that never change an answer: parallelism, output, logging, credentials, endpoints, client plumbing
_NOT_ANSWER = (
    *("api_key", "api_key_env", "api_base", "num_retries", "cache", "max_concurrency", "requests_per_minute"),
    "deadline",
    *("max_concurrent_searches", "max_concurrent_fetches", "user_agent", "cache_dir"),
)
_NOT_ANSWER_KEYS = (
    *("run.threads", "run.output_dir", "run.cancel_grace"),
    *("run.executor", "run.ray_address", "run.ray_cpus"),
)
_NOT_ANSWER_SECTIONS = ("log", "logging", "observe", "mlflow", "progress")


def file_sha256(path: str | Path) -> str:
    """The sha256 hex digest of a file's bytes (a directory: of its files' names and bytes, in sorted order)."""
    digest = hashlib.sha256()
    p = Path(path)
    files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    for f in files:
        if p.is_dir():
            digest.update(str(f.relative_to(p)).encode() + b"\0")
        with f.open("rb") as fh:
            for block in iter(functools.partial(fh.read, 1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def versions() -> dict[str, str | None]:
    """Installed versions of memento, dspy, litellm and torch (read from metadata: torch is not imported)."""
    from memento import __version__

    return {
        "memento": __version__,
        "dspy": _version("dspy"),
        "litellm": _version("litellm"),
        "torch": _version("torch"),
        "python": platform.python_version(),
    }


@functools.cache
def git_commit() -> str | None:
    """The commit of the checkout memento runs from (``None`` for an installed package or without git)."""
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    if out.returncode != 0 or not commit:
        return None
    dirty = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        timeout=5,
        check=False,
    )
    return commit + ("-dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")


def _role_endpoints(settings: Settings) -> dict[str, dict[str, Any]]:
    out = {}
    for name in ROLES:
        role = settings.role(name)
        out[name] = {
            "model": role.model,
            "api_base": scrub_url(role.api_base) if role.api_base else None,
            "temperature": role.temperature,
            "max_tokens": role.max_tokens,
        }
    return out


def provenance(
    settings: Settings,
    *,
    data_files: Mapping[str, str | Path | None] | None = None,
    started_at: str | None = None,
    ended_at: str | None = None,
    executor: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything needed to say what produced a result (see the module docstring); secrets masked.

    ``executor``: where the forward passes ran (:meth:`memento.execution.ray_executor.RayExecutor.info`); default:
    threads of this process.
    """
    data = {}
    for label, path in (data_files or {}).items():
        if path is None:
            continue
        p = Path(path)
        data[label] = {"path": str(p), "sha256": file_sha256(p) if p.exists() else None}
    rows = [{"key": key, "value": scrub_data(_plain(value)), "source": src} for key, value, src in settings.effective()]
    return {
        "settings": rows,
        "roles": _role_endpoints(settings),
        "versions": versions(),
        "git_commit": git_commit(),
        "data": data,
        "command": scrub(" ".join([Path(sys.argv[0]).name if sys.argv else "python", *sys.argv[1:]])),
        "executor": executor or {"executor": "threads", "nodes": 1, "threads": settings.run.threads},
        "started_at": started_at,
        "ended_at": ended_at or utcnow().isoformat(),
    }


def _plain(value: Any) -> Any:
    return value if isinstance(value, int | float | bool | str) or value is None else str(value)


def _answer_settings(settings: Settings) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, _value, _source in settings.effective():
        section, _, field = key.partition(".")
        if field in _NOT_ANSWER or key in _NOT_ANSWER_KEYS or section in _NOT_ANSWER_SECTIONS:
            continue
        owner = settings.role(section) if section in ROLES else getattr(settings, section)
        out[key] = _plain(getattr(owner, field))
    return out


def run_key(
    settings: Settings,
    *,
    task: str,
    method: str,
    metric: str,
    data_sha256: str | None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The answer-changing identity of a run; equal keys may share finished examples (see the module docstring)."""
    return {
        "task": task,
        "method": method,
        "metric": metric,
        "data_sha256": data_sha256,
        **(extra or {}),
        "settings": _answer_settings(settings),
    }


def key_mismatch(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """The first difference between two run keys as ``"field: old != new"``, or ``None`` when they match."""
    for field in dict.fromkeys([*old, *new]):
        if field == "settings":
            continue
        if old.get(field) != new.get(field):
            return f"{field}: {old.get(field)!r} != {new.get(field)!r}"
    old_s, new_s = old.get("settings") or {}, new.get("settings") or {}
    for key in dict.fromkeys([*old_s, *new_s]):
        if old_s.get(key) != new_s.get(key):
            return f"{key}: {old_s.get(key)!r} != {new_s.get(key)!r}"
    return None
