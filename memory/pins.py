"""What memory a program reads, pinned: the MEMENTO memory version and the banks' high-water marks, for results files.

A store opened for test time (read-only) is pinned when it opens: :class:`~memento.memory.memento_memory.MementoMemory`
to the version that is the head then (``end_seq``: that version's last change-log entry), the case bank and the
trajectory bank to their last stored row (``high_water``). Every example of an evaluation therefore reads the same
memory, whatever a trainer commits meanwhile, and the results file says which (one ``memory`` entry per file).

Each pinned store answers ``pin_info() -> {store: {...}}``; :func:`memory_pins` collects them from a program (its
sub-modules and their attributes). As store queries, on any backend: the MEMENTO memory at a pin is the state of
version ``v`` (items with every change after ``end_seq`` undone); a bank at a pin is its rows with
``seq``/``rid <= high_water``.

Example:
    >>> from memento.memory.pins import memory_pins
    >>> memory_pins(object()) is None
    True
"""

from __future__ import annotations

from typing import Any

__all__ = ["describe_pins", "memory_pins"]

_MAX_DEPTH = 8


def _visit(obj: Any, found: dict[str, Any], seen: set[int], depth: int) -> None:
    if depth > _MAX_DEPTH or id(obj) in seen or obj is None or isinstance(obj, str | bytes | int | float | bool):
        return
    seen.add(id(obj))
    pin = getattr(type(obj), "pin_info", None)
    if callable(pin):
        found.update(obj.pin_info())
        return
    if isinstance(obj, dict):
        for value in obj.values():
            _visit(value, found, seen, depth + 1)
        return
    if isinstance(obj, list | tuple | set | frozenset):
        for value in obj:
            _visit(value, found, seen, depth + 1)
        return
    module = type(obj).__module__ or ""
    if not (module.startswith("memento") or _is_dspy_module(obj)):
        return  # LMs, tasks' data, arrays...: no memory there
    for value in getattr(obj, "__dict__", {}).values():
        _visit(value, found, seen, depth + 1)


def _is_dspy_module(obj: Any) -> bool:
    import dspy

    return isinstance(obj, dspy.Module)


def memory_pins(program: Any) -> dict[str, Any] | None:
    """The pins of every memory store ``program`` reads (``None`` when it reads none).

    Returns:
        ``{"memento_memory": {"version", "end_seq"}, "case_bank": {"high_water"}, "trajectory_bank":
        {"high_water"}}``, with only the stores the program holds (which directories: the run's settings say).
    """
    found: dict[str, Any] = {}
    _visit(program, found, set(), 0)
    return found or None


def describe_pins(pins: dict[str, Any] | None) -> str:
    """The pins of :func:`memory_pins` in words, for one-line messages (``"memento_memory version 1 (change-log
    entry 12)"``)."""
    if not pins:
        return "no memory"
    parts = []
    for store, pin in sorted(pins.items()):
        if "version" in pin:
            parts.append(f"{store} version {pin['version']} (change-log entry {pin.get('end_seq')})")
        else:
            parts.append(f"{store} rows up to {pin.get('high_water')}")
    return ", ".join(parts)
