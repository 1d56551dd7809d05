"""CLI options of the CBR and JitMem methods (``[cbr]`` and ``[jitmem]`` settings as flags), shared by commands.

Each option defaults to ``None`` so an unset flag never shadows the environment or the TOML file.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import typer

__all__ = [
    "CBRK",
    "CBRPolicy",
    "CBRTrainPolicy",
    "CBRAlpha",
    "CBRMinPairs",
    "CBRPasses",
    "CBROwnCases",
    "JitMemProtocol",
    "JitMemOrderings",
    "JitMemWarm",
    "JitMemStreamBatch",
    "JitMemPayloadTokens",
    "JitMemTrainGate",
    "section",
]

_POLICIES = Literal["cosine", "q", "softmax"]
CBRK = Annotated[int | None, typer.Option("--cbr-k", min=1, help="CBR: cases retrieved per task (cbr.k, 4).")]
CBRPolicy = Annotated[
    _POLICIES | None,
    typer.Option("--cbr-policy", help="CBR test-time retrieval: cosine, q (greedy Q-gate, default) or softmax."),
]
CBRTrainPolicy = Annotated[
    _POLICIES | None,
    typer.Option("--cbr-train-policy", help="CBR training retrieval (default softmax over the gate's logits)."),
]
CBRAlpha = Annotated[
    float | None, typer.Option("--cbr-alpha", min=1e-9, help="CBR softmax temperature over the gate's logits.")
]
CBRMinPairs = Annotated[
    int | None, typer.Option("--cbr-min-pairs", min=0, help="CBR: logged pairs before the gate replaces cosine (32).")
]
CBRPasses = Annotated[
    int | None,
    typer.Option("--cbr-passes", min=1, help="CBR training passes over the same task set, the bank growing (1)."),
]
CBROwnCases = Annotated[
    bool | None,
    typer.Option("--cbr-own-cases/--no-cbr-own-cases", help="Multi-pass only: a task may read its own earlier case."),
]
JitMemProtocol = Annotated[
    Literal["frozen", "stream"] | None,
    typer.Option(
        "--jitmem-protocol",
        help="JitMem test protocol: frozen (bank built on train, read-only at test) or stream (bank grows over the "
        "test stream in judge-gated batches).",
    ),
]
JitMemOrderings = Annotated[
    int | None, typer.Option("--orderings", min=1, help="JitMem stream: seeded orderings of the test stream (1).")
]
JitMemWarm = Annotated[
    bool | None,
    typer.Option("--warm/--cold", help="JitMem stream: start from the training bank (--warm) or empty (--cold)."),
]
JitMemStreamBatch = Annotated[
    int | None, typer.Option("--stream-batch", min=1, help="JitMem stream: tasks per batch (jitmem.stream_batch, 10).")
]
JitMemPayloadTokens = Annotated[
    int | None, typer.Option("--payload-tokens", min=1, help="JitMem: curator payload budget in tokens (2000).")
]
JitMemTrainGate = Annotated[
    Literal["judge", "ground_truth"] | None,
    typer.Option("--jitmem-train-gate", help="JitMem training bank gate: judge (default) or ground_truth (metric)."),
]


def section(**values: Any) -> dict[str, Any]:
    """The set flags of one settings section (``None`` values dropped)."""
    return {key: value for key, value in values.items() if value is not None}
