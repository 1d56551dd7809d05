"""MLflow tracking of `compare`, `eval` and `train` against a local SQLite tracking store made inside the test.

MLflow is slow to import and to create a store, so this is one test: a compare (parent run, one child per method),
an eval and a train run (their own runs) in the same store, checked through MLflow's own client API. Telemetry is
off and the conftest's socket guard fails the test if anything but loopback is contacted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.testing import OpenAICompatServer, ScriptedEngine

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared fixture
from memento_training_fixture import make_engine, write_data  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
QUESTIONS = REPO / "examples" / "multihop" / "questions.jsonl"


def test_compare_and_eval_runs_in_mlflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mlflow", reason="the mlflow extra (installed by dev)")
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("DO_NOT_TRACK", "1")
    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines()[:4]]
    data = tmp_path / "q.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    uri = f"sqlite:///{tmp_path / 'ml' / 'mlflow.db'}"
    out = tmp_path / "cmp"
    engine = ScriptedEngine(overrides={"answer": "novelist"})
    runner = CliRunner()
    with OpenAICompatServer(engine) as server:
        common = ["--lm", "openai/x", "--api-base", server.api_base, "--threads", "1", "--mlflow", uri]
        result = runner.invoke(
            app,
            [
                "compare", "--task", "multihop", "--data", str(data), "--n-train", "2", "--n-test", "2",
                "--methods", "closed_book,bootstrap:closed_book", "--budget", "tiny", "--out", str(out),
                "--embedder", "hashing", *common,
            ],
            env={"COLUMNS": "200", "MEMENTO_LM_CACHE": "false"},
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        result = runner.invoke(
            app,
            ["eval", "--task", "multihop", "--data", str(data), "--out", str(tmp_path / "ev"), *common],
            env={"COLUMNS": "200", "MEMENTO_LM_CACHE": "false"},
        )
        assert result.exit_code == 0, result.output
        assert "memento: MLflow run" in result.stderr
    corpus, questions = write_data(tmp_path / "train")
    with OpenAICompatServer(make_engine()) as server:
        result = runner.invoke(
            app,
            [
                "train", "--task", "multihop", "--data", str(questions), "--memory", str(tmp_path / "mem"),
                "--batch-size", "3", "--limit", "6", "--corpus", str(corpus), "--embedder", "hashing",
                "--lm", "openai/scripted", "--api-base", server.api_base, "--threads", "2", "--mlflow", uri,
            ],
            env={"COLUMNS": "200", "MEMENTO_LM_CACHE": "false", "MEMENTO_BUDGETS_TOTAL_QUESTIONS": "3",
                 "MEMENTO_BUDGETS_INITIAL_QUESTIONS": "2", "MEMENTO_BUDGETS_STEPS_PER_QUESTION": "3"},
        )  # fmt: skip
        assert result.exit_code == 0, result.output
    # an eval whose LM cannot be reached fails after its MLflow run opened: the run is FAILED, not FINISHED
    result = runner.invoke(
        app,
        ["eval", "--task", "multihop", "--data", str(data), "--out", str(tmp_path / "ev_failed"),
         "--lm", "openai/x", "--api-base", "http://127.0.0.1:9/v1", "--threads", "1", "--mlflow", uri],
        env={"COLUMNS": "200", "MEMENTO_LM_CACHE": "false", "MEMENTO_LM_NUM_RETRIES": "0"},
    )  # fmt: skip
    assert result.exit_code == 1, result.output

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("memento")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    by_name = {run.info.run_name: run for run in runs}
    parent = by_name[f"compare multihop ({out.name})"]
    children = [run for run in runs if run.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(run.info.run_name for run in children) == ["bootstrap:closed_book", "closed_book"]

    report = json.loads((out / "results.json").read_text(encoding="utf-8"))
    for child in children:
        method = report["methods"][child.info.run_name]
        metrics = child.data.metrics
        assert metrics["mean"] == pytest.approx(method["mean"])
        assert metrics["ci_low"] <= metrics["mean"] <= metrics["ci_high"]
        assert metrics["test_lm_calls"] == method["costs"]["test"]["lm_calls"] > 0
        assert metrics["train_lm_calls"] == method["costs"]["train"]["lm_calls"]
        history = client.get_metric_history(child.info.run_id, "score")
        assert [m.step for m in history] == [0, 1] and [m.value for m in history] == method["scores"]
        artifacts = {a.path for a in client.list_artifacts(child.info.run_id)}
        assert {"result.json", "test"} <= artifacts
        assert child.data.tags["memento.status"] == "done"
    assert parent.data.params["lm.model"] == "openai/x" and parent.data.params["run.threads"] == "1"
    assert parent.data.metrics["closed_book.mean"] == pytest.approx(report["methods"]["closed_book"]["mean"])
    parent_files = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"results.json", "results.md", "report.html", "score_vs_cost.png"} <= parent_files

    evaluations = [run for run in runs if run.info.run_name == "eval closed_book"]
    assert sorted(run.info.status for run in evaluations) == ["FAILED", "FINISHED"]
    evaluation = next(run for run in evaluations if run.info.status == "FINISHED")
    assert evaluation.data.tags.get("mlflow.parentRunId") is None
    saved = json.loads((tmp_path / "ev" / "results.json").read_text(encoding="utf-8"))
    assert evaluation.data.metrics["mean"] == pytest.approx(saved["mean"])
    assert evaluation.data.metrics["lm_calls"] == saved["usage"]["lm_calls"] == 4
    assert len(client.get_metric_history(evaluation.info.run_id, "score")) == 4
    assert {"results.json", "report.html"} <= {a.path for a in client.list_artifacts(evaluation.info.run_id)}
    training = by_name["train multihop"]
    assert [m.step for m in client.get_metric_history(training.info.run_id, "version")] == [1, 2]
    assert len(client.get_metric_history(training.info.run_id, "lm_calls")) == 2  # one point per batch
    # the memory guard's rejections per batch (the fixture's distillers propose honest items: none)
    assert [m.value for m in client.get_metric_history(training.info.run_id, "guard_rejections")] == [0, 0]
    assert "report.html" in {a.path for a in client.list_artifacts(training.info.run_id)}
    assert training.data.params["memory.dir"] == str(tmp_path / "mem")  # the effective settings, --memory included
    # DSPy autologging recorded traces of the program calls in the experiment
    import mlflow

    traces = mlflow.search_traces(locations=[experiment.experiment_id], return_type="list")
    assert len(traces) >= 4
