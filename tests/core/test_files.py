"""memento.utils.files: atomic writes, and saved programs never carry a secret (hardening: "secrets never land in saved
programs")."""

from __future__ import annotations

import json

import dspy
import pytest

from memento.utils.files import save_program
from memento.utils.scrub import register_secret


def test_a_saved_program_has_its_secrets_scrubbed_and_still_loads(tmp_path):
    secret = "sk-live-0123456789abcdefTOPSECRET"
    register_secret(secret)
    program = dspy.Predict("question -> answer")
    program.demos = [
        dspy.Example(
            question=f"my key is {secret}; read https://bob:hunter2@example.org/a",
            answer="ok",
        ).with_inputs("question")
    ]
    path = save_program(program, tmp_path / "out" / "program.json")
    text = path.read_text(encoding="utf-8")
    assert secret not in text and "hunter2" not in text
    assert "https://bob" not in text and "example.org/a" in text  # the URL stays, its password goes
    assert sorted(p.name for p in path.parent.iterdir()) == ["program.json"]  # no temporary file left behind
    reloaded = dspy.Predict("question -> answer")
    reloaded.load(str(path))
    assert len(reloaded.demos) == 1 and reloaded.demos[0]["answer"] == "ok"
    assert json.loads(text)["demos"][0]["question"].startswith("my key is ")


def test_a_failing_save_leaves_the_previous_file(tmp_path):
    class Broken:
        def save(self, path):
            raise RuntimeError("disk full")

    target = tmp_path / "program.json"
    target.write_text('{"previous": true}', encoding="utf-8")
    with pytest.raises(RuntimeError, match="disk full"):
        save_program(Broken(), target)
    assert json.loads(target.read_text(encoding="utf-8")) == {"previous": True}
    assert [p.name for p in tmp_path.iterdir()] == ["program.json"]
