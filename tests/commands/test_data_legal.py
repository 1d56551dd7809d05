"""`memento data legal` end to end against a local OpenAI-compatible server: the files, and the split equal to the
one `memento compare --data kept.csv --n-train N --n-test M --seed 42` makes."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

from typer.testing import CliRunner

from memento.cli import app
from memento.testing import OpenAICompatServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared fixture
from legal_protocol_fixture import make_engine, write_corpus, write_justice  # noqa: E402


def _ids(path: Path) -> list[str]:
    with path.open(newline="", encoding="utf-8") as handle:
        return [row["ID"] for row in csv.DictReader(handle)]


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        "MEMENTO_LM_API_KEY": "test-key",
        "MEMENTO_LM_CACHE": "false",
        "MEMENTO_WEB_CACHE_DIR": str(tmp_path / "webcache"),
        "COLUMNS": "300",
    }


def test_data_legal_writes_the_protocol_and_compare_makes_the_same_split(tmp_path):
    data = write_justice(tmp_path / "justice.csv")
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    out = tmp_path / "legal"
    with OpenAICompatServer(make_engine()) as server:
        lm = ["--lm", "openai/scripted", "--api-base", server.api_base]
        args = ["data", "legal", "--data", str(data), "--out", str(out), "--n-train", "3", "--n-test", "4",
                "--corpus", str(corpus), "--threads", "2", *lm]  # fmt: skip
        result = CliRunner().invoke(app, args, env=_env(tmp_path))
        assert result.exit_code == 0, result.output
        screened = server.chat_requests
        again = CliRunner().invoke(app, args, env=_env(tmp_path))  # resumes: nothing is screened twice
        assert again.exit_code == 0 and server.chat_requests == screened, again.output
        compare = CliRunner().invoke(
            app,
            ["compare", "--task", "legal", "--data", str(out / "kept.csv"), "--n-train", "3", "--n-test", "4",
             "--seed", "42", "--methods", "closed_book", "--out", str(tmp_path / "cmp"), *lm],
            env=_env(tmp_path),
        )  # fmt: skip
        assert compare.exit_code == 0, compare.output
    assert "14 rows; 11 with a term of 2010 or later; 10 usable (skipped: 1 blank first_party_winner)" in result.output
    assert "leakage filter: 8 kept, 2 dropped (outcome retrieved before the cutoff), 0 not screened" in result.output
    assert "cutoff: January 1st of (term - 5): JUSTICE holds decision terms, not decision dates" in result.output
    assert f"the same split as: memento compare --task legal --data {out / 'kept.csv'} --n-train 3 --n-test 4 " in (
        result.output
    )
    assert "0 screened in this run" in again.output
    assert sorted(json.loads(line)["id"] for line in (out / "dropped.jsonl").read_text().splitlines()) == ["101", "109"]
    split = json.loads((tmp_path / "cmp" / "results.json").read_text())["split"]
    assert split["train_ids"] == _ids(out / "train.csv") and split["test_ids"] == _ids(out / "test.csv")
    assert len(split["train_ids"]) == 3 and len(split["test_ids"]) == 4


def test_data_legal_bad_input_is_one_line(tmp_path):
    data = write_justice(tmp_path / "justice.csv")
    runner = CliRunner()
    no_lm = runner.invoke(
        app, ["data", "legal", "--data", str(data), "--out", str(tmp_path / "o")], env={"COLUMNS": "300"}
    )
    assert no_lm.exit_code == 1 and len(no_lm.output.strip().splitlines()) == 1 and "--lm" in no_lm.output
    lm = ["--lm", "openai/x", "--api-base", "http://127.0.0.1:9/v1"]
    missing = runner.invoke(app, ["data", "legal", "--data", str(tmp_path / "nope.csv"), "--out", "o", *lm])
    assert missing.exit_code == 1 and "nope.csv" in missing.output and len(missing.output.strip().splitlines()) == 1
    plain = tmp_path / "plain.txt"
    plain.write_text("a file\n")
    under = runner.invoke(app, ["data", "legal", "--data", str(data), "--out", str(plain / "sub"), *lm])
    assert under.exit_code == 1 and str(plain) in under.output and "Traceback" not in under.output
    assert not (tmp_path / "o").exists()
