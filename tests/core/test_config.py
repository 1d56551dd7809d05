"""The [cbr] and [jitmem] settings: listed by `config show`, read from the environment and from CLI flags."""

from __future__ import annotations

from typer.testing import CliRunner

from memento.cli import app
from memento.core.config import load_settings


def test_config_show_lists_the_cbr_and_jitmem_sections() -> None:
    result = CliRunner().invoke(app, ["config", "show"], env={"MEMENTO_CBR_ALPHA": "0.3", "COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for key in ("cbr.k", "cbr.policy", "cbr.train_policy", "cbr.alpha", "cbr.prefilter", "cbr.min_pairs",
                "jitmem.k", "jitmem.payload_tokens", "jitmem.protocol", "jitmem.stream_batch", "jitmem.orderings",
                "jitmem.warm"):  # fmt: skip
        assert key in result.output, key
    row = next(line for line in result.output.splitlines() if "cbr.alpha" in line)
    assert "0.3" in row and "env" in row


def test_method_sections_take_flags_over_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("MEMENTO_JITMEM_STREAM_BATCH", "5")
    monkeypatch.setenv("MEMENTO_CBR_MIN_PAIRS", "8")
    settings = load_settings(flags={"cbr": {"min_pairs": 2}, "jitmem": {"protocol": "stream"}})
    assert settings.cbr.min_pairs == 2 and settings.source_of("cbr.min_pairs") == "flag"
    assert settings.jitmem.stream_batch == 5 and settings.source_of("jitmem.stream_batch") == "env"
    assert settings.jitmem.protocol == "stream" and settings.jitmem.payload_tokens == 2000


def test_run_cbr_trains_with_the_cbr_flags(tmp_path) -> None:
    import json

    from memento.memory.case_bank import CaseBank, StoredEmbedder
    from memento.testing import OpenAICompatServer, ScriptedEngine

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"doc_id": "d1", "title": "Acme", "text": "Acme was founded by Ada in Lyon."}) + "\n")
    engine = ScriptedEngine(
        overrides={"sub_tasks": ["Who founded Acme?"], "done": True, "answer": "Ada", "reward": 1.0, "reasoning": "ok"}
    )
    memory = tmp_path / "mem"
    env = {
        "MEMENTO_LM_CACHE": "false",
        "MEMENTO_BUDGETS_STEPS_PER_QUESTION": "2",
        "MEMENTO_WEB_CACHE_DIR": str(tmp_path),
    }
    with OpenAICompatServer(engine) as server:
        for i in range(2):
            args = ["run", "--task", "qa", "--question", f"Who founded Acme ({i})?", "--method", "cbr"]
            args += ["--memory", str(memory), "--corpus", str(corpus), "--out", str(tmp_path / f"t{i}.json")]
            args += ["--cbr-k", "1", "--cbr-alpha", "0.5", "--cbr-min-pairs", "5", "--cbr-prefilter", "3"]
            args += ["--lm", "openai/scripted", "--api-base", server.api_base]
            result = CliRunner().invoke(app, args, env=env)
            assert result.exit_code == 0, result.output
    second = json.loads((tmp_path / "t1.json").read_text())
    notes = [n for n in second["notes"] if n.startswith("cbr: retrieved")]
    assert notes and notes[0].startswith("cbr: retrieved 1 cases by softmax")  # training explores, k from the flag
    shown = {row["key"]: (row["value"], row["source"]) for row in second["provenance"]["settings"]}
    assert shown["cbr.prefilter"] == (3, "flag") and shown["cbr.k"] == (1, "flag")  # --cbr-prefilter reached [cbr]
    bank = CaseBank(memory / "cbr", StoredEmbedder.of(memory / "cbr"), frozen=True)
    assert bank.count() == 2 and bank.pairs_logged() == 1  # the second task credited the one case it read


def test_cbr_prefilter_reaches_the_case_bank(tmp_path) -> None:
    from memento.core.config import load_settings as _load
    from memento.memory.embedder import HashingEmbedder
    from memento.programs.registry import build_program

    settings = _load(flags={"cbr": {"prefilter": 3}, "web": {"backend": "offline"}})
    agent = build_program("cbr", task="qa", settings=settings, memory_dir=tmp_path, embedder=HashingEmbedder())
    assert agent.bank.prefilter == 3


def test_run_orderings_is_exported_from_memento_optimize() -> None:
    import memento.optimize
    from memento.optimize.jitmem_stream import run_orderings

    assert memento.optimize.run_orderings is run_orderings and "run_orderings" in memento.optimize.__all__
