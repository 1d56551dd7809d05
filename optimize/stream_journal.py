"""The resumable journal of a JitMem stream (``stream.jsonl``): one JSON line per finished batch, flushed to disk,
with its items and the bank rows it staged. A resumed stream restores the finished batches (a torn last line is
ignored: that batch runs again), refuses a journal written by another stream (other tasks, seed or batch size),
and applies to the bank any checkpointed batch it missed.

Example:
    >>> done, run_id = restore_batches(path, header, items, bank)  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dspy

from memento.core.errors import ConfigError
from memento.core.types import Trajectory

if TYPE_CHECKING:
    from memento.programs.jitmem_agent import JitMemAgent
from memento.optimize.stream_records import StreamItem

__all__ = ["item_record", "tasks_digest", "append_batch", "restore_batches"]

logger = logging.getLogger(__name__)


def item_record(item: StreamItem) -> dict[str, Any]:
    pred = item.prediction
    outputs: dict[str, Any] = {}
    trajectory = None
    if pred is not None:
        trajectory = pred.get("trajectory", None)
        outputs = {k: v for k, v in pred.items() if k not in ("trajectory", "jitmem")}
    return {
        "position": item.position,
        "order": item.order,
        "batch": item.batch,
        "task_id": item.task_id,
        "bank_version": item.bank_version,
        "bank_size": item.bank_size,
        "score": item.score,
        "feedback": item.feedback,
        "accepted": item.accepted,
        "stored": item.stored,
        "error": item.error,
        "outputs": json.loads(json.dumps(outputs, default=str)),
        "jitmem": pred.get("jitmem", None) if pred is not None else None,
        "trajectory": trajectory.model_dump(mode="json") if isinstance(trajectory, Trajectory) else None,
    }


def tasks_digest(agent: JitMemAgent, tasks: Sequence[Any]) -> str:
    """A hash of the tasks' ids, input fields and cutoffs, in order (a checkpoint belongs to one task list)."""
    fields = ["id", "task_id", "cutoff", *agent.task.input_fields]
    digest = hashlib.sha256()
    for example in tasks:
        get = example.get if hasattr(example, "get") else (lambda key, default=None: default)
        record = {name: get(name, None) for name in fields}
        digest.update(json.dumps(record, sort_keys=True, default=str, ensure_ascii=False).encode("utf-8") + b"\n")
    return digest.hexdigest()


def append_batch(path: Path, meta: dict[str, Any], items: list[StreamItem], rows: list[dict[str, Any]]) -> None:
    """Append one finished batch as a single JSON line, flushed to disk (a torn last line is ignored on restore).

    ``rows`` are the bank writes staged by the batch, kept so that a crash before the bank applied them can be
    repaired on restore.
    """
    from memento.utils.files import scrubbed_json

    record = {**meta, "items": [item_record(item) for item in items], "rows": rows}
    line = scrubbed_json(record)  # no secret reaches the file
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def restore_batches(
    path: Path, header: dict[str, Any], items: list[StreamItem | None], bank: Any
) -> tuple[set[int], str]:
    """Fill ``items`` from a checkpoint's finished batches and apply any the bank missed.

    Returns the finished batch indices and the stream's run id (``""`` for a new checkpoint).
    """
    if not path.exists():
        return set(), ""
    done: set[int] = set()
    run_id = ""
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            logger.warning("%s:%d: torn checkpoint line ignored (that batch runs again)", path, lineno)
            continue
        if any(record.get(key) != value for key, value in header.items()):
            differ = ", ".join(key for key, value in header.items() if record.get(key) != value)
            raise ConfigError(f"checkpoint {path} was written by another stream (different {differ})")
        run_id = run_id or str(record.get("run_id") or "")
        if bank.apply_rows(record.get("rows") or [], key=str(record["key"])):
            logger.warning("%s: batch %s was checkpointed but not in the bank: applied now", path, record["batch"])
        for data in record["items"]:
            trajectory = Trajectory.model_validate(data["trajectory"]) if data.get("trajectory") else None
            pred = None
            if data.get("outputs") or trajectory is not None:
                pred = dspy.Prediction(**data["outputs"], trajectory=trajectory, jitmem=data.get("jitmem"))
            fields = {k: data[k] for k in ("position", "order", "batch", "task_id", "bank_version", "bank_size")}
            items[data["position"]] = StreamItem(
                **fields,
                prediction=pred,
                score=data.get("score"),
                feedback=data.get("feedback", ""),
                accepted=data.get("accepted"),
                stored=bool(data.get("stored")),
                error=data.get("error"),
            )
        done.add(int(record["batch"]))
    if done:
        logger.info("stream resumed from %s: %d finished batches restored", path, len(done))
    return done, run_id
