"""The [cbr] and [jitmem] settings: listed by `config show`, read from the environment and from CLI flags."""

from __future__ import annotations

from typer.testing import CliRunner

from memento.cli import app
from memento.config import load_settings


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
