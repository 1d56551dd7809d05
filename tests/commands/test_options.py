"""The CLI's options are defined once (memento/cli/commands/_options.py) and reach the settings the same way in every
command that takes them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.cli.commands._options import FLAGS, GROUPS, Flags, with_flags

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = [*sorted((ROOT / "memento" / "cli" / "commands").glob("*.py")), ROOT / "memento" / "cli" / "app.py"]


def test_every_option_is_declared_in_one_place() -> None:
    """No command declares an option of the shared table again: `"--cbr-k"` is written only in cli/flags.py."""
    declared = {name for flag in FLAGS.values() for name in flag.option_names()}
    declared |= {"--task", "--metric", "--embedder", "--corpus", "--no-wait"}  # (`memory show --limit` differs)
    assert {"--cbr-k", "--cbr-prefilter", "--warm", "--cold", "--budget", "--log-lm"} <= declared
    for path in COMMANDS:
        if path.name == "_options.py":
            continue
        strings = set(re.findall(r'typer\.Option\(\s*"([^"]+)"', path.read_text()))
        names = {n for decl in strings for n in decl.split("/")}
        again = sorted(names & declared)
        assert not again, f"{path.name} declares {again} again; use memento.cli.commands._options"
    text = "\n".join(p.read_text() for p in COMMANDS if p.name != "_options.py")
    assert "settings_from_flags" not in text and "load_settings(config, flags=" not in text


@pytest.mark.parametrize(
    ("command", "flags"),
    [
        ("run", ["--cbr-k", "--cbr-prefilter", "--payload-tokens", "--corpus", "--threads", "--lm", "--log-lm"]),
        ("eval", ["--cbr-k", "--cbr-prefilter", "--jitmem-protocol", "--orderings", "--profile", "--mlflow"]),
        ("train", ["--batch-size", "--exploration", "--stores", "--corpus", "--judge-lm", "--config"]),
        ("compare", ["--cbr-prefilter", "--cbr-passes", "--jitmem-train-gate", "--budget", "--gepa-max-metric-calls"]),
        ("optimize-curator", ["--payload-tokens", "--corpus", "--api-base", "--threads"]),
    ],
)
def test_commands_offer_the_shared_flags(command: str, flags: list[str]) -> None:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    for flag in flags:
        assert flag in result.output, (command, flag)


def test_flags_set_their_settings_and_repeat_as_arguments(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MEMENTO_CBR_K", "6")
    flags = Flags({"cbr_k": None, "cbr_prefilter": 8, "stores": "m1, m3", "warm": False, "corpus": tmp_path / "c"})
    settings = flags.settings(web={"backend": "offline"})
    assert settings.cbr.k == 6 and settings.source_of("cbr.k") == "env"  # an unset flag leaves the lower layer
    assert settings.cbr.prefilter == 8 and settings.source_of("cbr.prefilter") == "flag"
    assert settings.memory.stores == ["M1", "M3"] and settings.jitmem.warm is False
    assert settings.web.corpus == tmp_path / "c" and settings.web.backend == "offline"
    assert flags.argv() == ["--cbr-prefilter", "8", "--stores", "m1, m3", "--cold", "--corpus", str(tmp_path / "c")]
    assert Flags({"cbr_own_cases": True, "cbr_passes": 2}).argv() == ["--cbr-own-cases", "--cbr-passes", "2"]


def test_with_flags_adds_options_and_hands_them_over() -> None:
    import typer

    seen: dict = {}

    @with_flags("lm", "cbr_k")
    def command(name: str = "x", *, flags: Flags) -> None:
        seen.update(name=name, k=flags.cbr_k, model=flags.settings().lm.model)

    mini = typer.Typer()
    mini.command()(command)
    result = CliRunner().invoke(mini, ["--name", "y", "--cbr-k", "3", "--lm", "openai/m"])
    assert result.exit_code == 0, result.output
    assert seen == {"name": "y", "k": 3, "model": "openai/m"}
    assert set(GROUPS["lm"]) == {"config", "lm", "api_base", "judge_lm", "structured_outputs"}
    with pytest.raises(KeyError, match="no CLI flag 'nope'"):
        with_flags("nope")
