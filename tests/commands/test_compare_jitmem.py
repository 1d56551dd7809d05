"""JitMem's protocols from the CLI: `memento compare --methods jitmem --jitmem-protocol stream --orderings 3`.

The scripted executor answers correctly only when its context carries curated notes, so the first stream batch
(empty bank, nothing to curate) scores 0 and later batches score 1: a real cold-start curve.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from typer.testing import CliRunner

from commands.test_compare import _ENV, multihop  # noqa: F401  (the fixture)
from memento.cli import app
from memento.optimize.report import CompareReport
from memento.testing import OpenAICompatServer, ScriptedEngine

LABEL = "Curated notes from similar past tasks"


def _engine(gold: dict[str, str], *, known: frozenset[str] | set[str] = frozenset()) -> ScriptedEngine:
    def searched(call) -> bool:
        return "observation_0" in call.inputs

    def answer(call) -> str:
        question = call.inputs.get("question", "")
        helped = LABEL in call.inputs.get("context", "") or question in known
        return gold.get(question, "no idea") if helped else "x"

    return ScriptedEngine(
        overrides={
            "answer": answer,
            "next_tool_name": lambda call: "finish" if searched(call) else "search_web",
            "next_tool_args": lambda call: {} if searched(call) else {"query": call.inputs.get("question", "")[:80]},
            "payload": "Relevant past experience: search the founder, then the birthplace.",
            "success": True,
        }
    )


def _args(multihop: dict, out: Path, server, *extra: str) -> list[str]:  # noqa: F811
    return [
        "compare",
        "--task", "multihop",
        "--data", str(multihop["questions"]),
        "--n-train", "4",
        "--n-test", "6",
        "--methods", "jitmem",
        "--baseline", "jitmem",
        "--budget", "tiny",
        "--out", str(out),
        "--lm", "openai/scripted",
        "--api-base", server.api_base,
        "--corpus", str(multihop["corpus"]),
        "--threads", "2",
        "--stream-batch", "2",
        *extra,
    ]  # fmt: skip


def test_stream_protocol_from_the_cli_gives_mean_std_over_orderings_and_the_cold_start_curve(
    multihop: dict,  # noqa: F811
    tmp_path: Path,
) -> None:
    engine = _engine(multihop["gold"])
    out = tmp_path / "cmp"
    env = {**_ENV, "MEMENTO_WEB_CACHE_DIR": str(tmp_path / "webcache")}
    with OpenAICompatServer(engine) as server:
        args = _args(multihop, out, server, "--jitmem-protocol", "stream", "--orderings", "3")
        result = CliRunner().invoke(app, args, env={**env, "COLUMNS": "200"})
        assert result.exit_code == 0, result.output
    report = CompareReport.model_validate_json((out / "results.json").read_text())
    jit = report.methods["jitmem"]
    assert jit.status == "done" and jit.costs.train.lm_calls == 0  # cold start: no training bank
    # the terminal shows the mean ± std over orderings and the cold-start curve, not only the files
    shown = " ".join(result.output.split())
    summary = jit.info["stream"]
    assert (
        f"jitmem stream: mean {summary['mean']:.3f} ± {summary['std']:.3f} over 3 orderings from an empty bank" in shown
    )
    curve = ", ".join(f"{p['batch']}: {p['score']:.2f} ({min(p['bank_size'])})" for p in summary["curve"])
    assert f"jitmem stream: score per stream batch (mean over orderings; bank size seen): {curve}" in shown
    stream = jit.info["stream"]
    assert stream["orderings"] == 3 and stream["stream_batch"] == 2 and stream["warm"] is False
    orderings = stream["per_ordering"]
    assert [o["seed"] for o in orderings] == [42, 43, 44]
    assert len({tuple(o["order"]) for o in orderings}) > 1  # seeded orderings differ
    for o in orderings:
        assert o["bank_start"] == 0  # every ordering starts from an empty bank
        sizes = [p["bank_size"] for p in o["curve"]]
        assert sizes == [0, 2, 4] and o["bank_end"] == 6  # grows by the accepted batch, between batches only
    # cold start: the first batch has nothing to curate and scores 0; later a task scores 1 exactly when BM25
    # retrieved a past trajectory for it (a task sharing no term with the bank gets no notes)
    expected_curves: list[list[float]] = []
    for n in (1, 2, 3):
        lines = (out / "jitmem" / "test" / f"ordering-{n}" / "stream.jsonl").read_text().splitlines()
        batch_means: list[float] = []
        for line in lines:
            items = json.loads(line)["items"]
            assert all((item["score"] == 1.0) == bool(item["jitmem"]["retrieved"]) for item in items)
            batch_means.append(sum(item["score"] for item in items) / len(items))
        expected_curves.append(batch_means)
    assert [[p["score"] for p in o["curve"]] for o in orderings] == expected_curves
    assert all(c[0] == 0.0 and c[-1] == 1.0 for c in expected_curves)
    means = [o["mean"] for o in orderings]
    assert stream["mean"] == sum(means) / 3
    assert abs(stream["std"] - statistics.stdev(means)) < 1e-12  # sample std over the orderings
    per_batch = [round(sum(c) / 3, 6) for c in zip(*expected_curves, strict=True)]
    assert [round(p["score"], 6) for p in stream["curve"]] == per_batch
    # within a batch every task saw the same bank (checkpointed per batch, before the bank applies it)
    for n in (1, 2, 3):
        lines = (out / "jitmem" / "test" / f"ordering-{n}" / "stream.jsonl").read_text().splitlines()
        for line in lines:
            batch = json.loads(line)
            assert len({item["bank_size"] for item in batch["items"]}) == 1
            assert all(item["accepted"] for item in batch["items"])
    # each test example's score is its mean over the orderings (first-batch tasks score 0 in that ordering)
    assert len(jit.scores) == 6 and abs(sum(jit.scores) / 6 - stream["mean"]) < 1e-9
    assert "--method jitmem --corpus" in jit.artefacts["eval"] and "--memory" not in jit.artefacts["eval"]
    assert jit.artefacts["eval"].endswith("--jitmem-protocol stream --orderings 3 --stream-batch 2 --cold")
    md = (out / "results.md").read_text()
    assert "## Test streams" in md and "over 3 orderings from an empty bank" in md
    assert json.loads((out / "jitmem" / "test" / "stream.json").read_text())["mean"] == stream["mean"]


def test_warm_stream_starts_from_the_training_bank_and_ground_truth_can_gate_it(
    multihop: dict,  # noqa: F811
    tmp_path: Path,
) -> None:
    known = set(list(multihop["gold"])[::2])  # half the questions are answered right even without notes
    engine = _engine(multihop["gold"], known=known)
    out = tmp_path / "cmp"
    env = {**_ENV, "MEMENTO_WEB_CACHE_DIR": str(tmp_path / "webcache")}
    with OpenAICompatServer(engine) as server:
        extra = ("--jitmem-protocol", "stream", "--warm", "--orderings", "2", "--jitmem-train-gate", "ground_truth")
        result = CliRunner().invoke(app, _args(multihop, out, server, *extra), env=env)
        assert result.exit_code == 0, result.output
    jit = CompareReport.model_validate_json((out / "results.json").read_text()).methods["jitmem"]
    # ground truth gates the training bank: the scripted answers are wrong without notes, right with them
    train_bank = jit.info["bank_size"]
    assert jit.info["train_gate"] == "ground_truth" and jit.info["stored"] == train_bank
    assert 0 < train_bank < 4  # only the training runs the metric scored correct entered the bank
    stream = jit.info["stream"]
    assert stream["warm"] is True and "--memory" in jit.artefacts["eval"] and jit.artefacts["eval"].endswith("--warm")
    for o in stream["per_ordering"]:
        assert o["bank_start"] == train_bank and o["bank_end"] == train_bank + 6
    # the training bank was copied per ordering, never written by the test streams
    from memento.memory.trajectory_bank import TrajectoryBank

    assert len(TrajectoryBank(out / "jitmem" / "memory" / "jitmem", read_only=True)) == train_bank


def test_eval_runs_the_stream_protocol_over_orderings(multihop: dict, tmp_path: Path) -> None:  # noqa: F811
    rows = multihop["questions"].read_text().splitlines()[:4]
    data = tmp_path / "test.jsonl"
    data.write_text("\n".join(rows) + "\n")
    engine = _engine(multihop["gold"])
    env = {**_ENV, "MEMENTO_WEB_CACHE_DIR": str(tmp_path / "webcache")}
    with OpenAICompatServer(engine) as server:
        args = ["eval", "--task", "multihop", "--data", str(data), "--method", "jitmem", "--out", str(tmp_path / "ev")]
        args += ["--jitmem-protocol", "stream", "--orderings", "2", "--stream-batch", "2", "--threads", "2"]
        args += ["--corpus", str(multihop["corpus"]), "--lm", "openai/scripted", "--api-base", server.api_base]
        result = CliRunner().invoke(app, args, env=env)
        assert result.exit_code == 0, result.output
        text = " ".join(result.output.split())
        assert "jitmem stream: mean 0.500 ± 0.000 over 2 orderings from an empty bank, batches of 2" in text
        assert "score per stream batch (mean over orderings; bank size seen): 1: 0.00 (0), 2: 1.00 (2)" in text
        summary = json.loads((tmp_path / "ev" / "stream.json").read_text())
        assert [p["score"] for p in summary["curve"]] == [0.0, 1.0]
        assert [o["bank_start"] for o in summary["per_ordering"]] == [0, 0]
        # results.json like every other protocol: per-example mean over orderings, the stream summary, provenance
        saved = json.loads((tmp_path / "ev" / "results.json").read_text())
        assert saved["method"] == "jitmem" and saved["n"] == 4 and saved["mean"] == summary["mean"] == 0.5
        # a task scores 0 in an ordering whose first batch held it (empty bank), 1 later: its score is the mean
        orders = [o["order"] for o in summary["per_ordering"]]
        expected = {task: sum(task not in order[:2] for order in orders) / 2 for task in orders[0]}
        assert {e["id"]: e["score"] for e in saved["examples"]} == expected
        assert all(e["prediction"] and e["usage"]["lm_calls"] > 0 for e in saved["examples"])
        assert saved["stream"]["curve"] == summary["curve"] and saved["run_key"] and saved["provenance"]
        assert len((tmp_path / "ev" / "trajectories.jsonl").read_text().splitlines()) == 4
        warm = CliRunner().invoke(app, [*args, "--warm"], env=env)
    assert warm.exit_code == 1 and "--warm starts the test stream from a training bank" in warm.output
