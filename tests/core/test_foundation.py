"""Foundation: settings precedence, LM roles, usage accounting, CLI behaviour, the offline harness."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

import dspy
import pytest
from typer.testing import CliRunner

import memento
from memento.cli import app
from memento.core.config import load_settings
from memento.core.errors import ConfigError, LMNotConfiguredError
from memento.execution.threads import run_parallel
from memento.llm.lm import configure
from memento.llm.lm_errors import explain_lm_error
from memento.records.usage import UsageMeter
from memento.testing import OpenAICompatServer, ScriptedEngine, scripted_lm, seq

runner = CliRunner()


def test_settings_precedence_file_env_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "m.toml"
    cfg.write_text('[lm]\nmodel = "openai/file"\ntemperature = 0.3\n[run]\nthreads = 3\n')
    s = load_settings(cfg)
    assert s.lm.model == "openai/file" and s.source_of("lm.model") == "file"
    assert s.run.threads == 3 and s.source_of("run.threads") == "file"
    assert s.source_of("run.seed") == "default"
    monkeypatch.setenv("MEMENTO_LM", "openai/env")
    monkeypatch.setenv("MEMENTO_RUN_THREADS", "5")
    s = load_settings(cfg)
    assert s.lm.model == "openai/env" and s.source_of("lm.model") == "env"
    assert s.lm.temperature == 0.3 and s.source_of("lm.temperature") == "file"
    assert s.run.threads == 5
    s = load_settings(cfg, flags={"lm": {"model": "openai/flag"}, "run": {"threads": None}})
    assert s.lm.model == "openai/flag" and s.source_of("lm.model") == "flag"
    assert s.run.threads == 5 and s.source_of("run.threads") == "env"


def test_roles_default_to_lm_and_keys_stay_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMENTO_LM_API_KEY", "sk-secret-123")
    monkeypatch.setenv("MEMENTO_REFLECTION_LM", "anthropic/claude")
    s = load_settings(flags={"lm": {"model": "openai/x", "api_base": "http://127.0.0.1:9/v1"}})
    judge = s.role("judge_lm")
    assert judge.model == "openai/x" and judge.api_base == "http://127.0.0.1:9/v1"
    assert judge.secret() == "sk-secret-123"
    refl = s.role("reflection_lm")
    assert refl.model == "anthropic/claude" and refl.api_base is None
    dumped = s.model_dump_json()
    assert "sk-secret-123" not in dumped and "sk-secret-123" not in repr(s)
    assert all("sk-secret-123" not in str(v) for _, v, _ in s.effective())


def test_toml_refuses_api_key_and_bad_values(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[lm]\nmodel = "openai/x"\napi_key = "sk-x"\n')
    with pytest.raises(ConfigError, match="api_key is not allowed"):
        load_settings(bad)
    worse = tmp_path / "worse.toml"
    worse.write_text("[run]\nthreads = 0\n")
    with pytest.raises(ConfigError, match="run.threads"):
        load_settings(worse)
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "missing.toml")


def test_configure_builds_distinct_role_lms() -> None:
    roles = configure(load_settings(flags={"lm": "openai/x"}))
    assert dspy.settings.lm is roles.lm
    assert roles.judge_lm is not roles.lm and roles.judge_lm.model == "openai/x"
    assert roles.role_of(roles.curator_lm) == "curator_lm"
    with pytest.raises(LMNotConfiguredError, match="--lm"):
        configure(load_settings())


def test_scripted_engine_answers_any_signature(engine: ScriptedEngine, lm: dspy.LM) -> None:
    from typing import Literal

    class Sig(dspy.Signature):
        """Classify."""

        text: str = dspy.InputField()
        label: Literal["pos", "neg"] = dspy.OutputField()
        score: float = dspy.OutputField()
        tags: list[str] = dspy.OutputField()

    out = dspy.Predict(Sig)(text="great")
    assert out.label == "pos" and out.score == 0.5 and out.tags == ["scripted"]
    engine.overrides["label"] = seq("neg", "pos")
    assert dspy.Predict(Sig)(text="a").label == "neg"
    assert dspy.Predict(Sig)(text="b").label == "pos"
    engine.when("special", score=0.9)
    assert dspy.Predict(Sig)(text="special case").score == 0.9
    assert engine.calls[-1].inputs["text"] == "special case"
    assert len(engine.calls) == 4


def test_usage_meter_counts_per_role_and_stage_under_threads() -> None:
    engine = ScriptedEngine()
    roles = configure(load_settings(flags={"lm": "openai/x"}))
    roles.lm = scripted_lm(engine)
    roles.judge_lm = scripted_lm(engine)
    dspy.configure(lm=roles.lm)

    class Ask(dspy.Signature):
        """Answer."""

        question: str = dspy.InputField()
        answer: str = dspy.OutputField()

    predict = dspy.Predict(Ask)
    with UsageMeter(roles) as meter:
        run_parallel(lambda q: predict(question=q), [f"q{i}" for i in range(12)], threads=4)
        with dspy.context(lm=roles.judge_lm):
            predict(question="judge me")
    usage = meter.usage()
    assert usage.lm_calls == 13 == len(engine.calls)
    assert usage.judge_calls == 1
    assert usage.by_role["lm"].lm_calls == 12
    assert usage.by_stage["Ask"].lm_calls == 13
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0


def test_http_stub_server_drives_the_openai_path(engine: ScriptedEngine, openai_server: OpenAICompatServer) -> None:
    engine.overrides["answer"] = "Paris"
    settings = load_settings(flags={"lm": {"model": "openai/x", "api_base": openai_server.api_base, "cache": False}})
    roles = configure(settings)
    with UsageMeter(roles) as meter:
        out = dspy.Predict("question -> answer")(question="Capital of France?")
    assert out.answer == "Paris"
    assert openai_server.chat_requests == 1 == meter.usage().lm_calls


def test_unreachable_server_is_one_clear_line() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lm = dspy.LM("openai/x", api_base=f"http://127.0.0.1:{port}/v1", api_key="k", cache=False, num_retries=0)
    with pytest.raises(Exception) as info:
        dspy.Predict("question -> answer")(question="q", lm=lm)
    message = explain_lm_error(info.value)
    assert message is not None and "unreachable" in message and "\n" not in message


@pytest.mark.network_guard_test
def test_network_guard_blocks_non_loopback() -> None:
    with pytest.raises(RuntimeError, match="non-loopback"):
        socket.create_connection(("10.255.255.1", 80), timeout=0.1)


def test_cli_help_version_and_config_show(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("run", "train", "eval", "compare", "memory", "corpus", "config"):
        assert command in result.output
    assert memento.__version__ in runner.invoke(app, ["--version"]).output

    cfg = tmp_path / "memento.toml"
    cfg.write_text('[lm]\nmodel = "openai/from-file"\n')
    monkeypatch.setenv("MEMENTO_LM_API_KEY", "sk-very-secret")

    def show(*extra: str) -> str:
        res = runner.invoke(app, ["config", "show", "--config", str(cfg), *extra], env={"COLUMNS": "200"})
        assert res.exit_code == 0, res.output
        return res.output

    row = next(line for line in show().splitlines() if "lm.model " in line and "judge" not in line)
    assert "openai/from-file" in row and "file" in row
    monkeypatch.setenv("MEMENTO_LM", "openai/from-env")
    row = next(line for line in show().splitlines() if "lm.model " in line and "judge" not in line)
    assert "openai/from-env" in row and "env" in row
    out = show("--lm", "openai/from-flag")
    row = next(line for line in out.splitlines() if "lm.model " in line and "judge" not in line)
    assert "openai/from-flag" in row and "flag" in row
    assert "sk-very-secret" not in out and "****" in out


def test_cli_without_lm_is_one_line_no_traceback(tmp_path: Path) -> None:
    env = {"PATH": str(Path(sys.executable).parent), "HOME": str(tmp_path), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run(
        [sys.executable, "-m", "memento.cli", "run", "--question", "What is 2+2?", "--task", "qa"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    # `run` needs an LM: it must refuse with one line naming --lm / MEMENTO_LM
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "--lm" in lines[0] and "MEMENTO_LM" in lines[0]


def test_cli_closed_port_is_one_line_saying_unreachable(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        "PATH": str(Path(sys.executable).parent),
        "HOME": str(tmp_path),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "MEMENTO_LM_NUM_RETRIES": "0",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "memento.cli", "run", "--task", "qa", "--method", "closed_book", "--question", "2+2?",
         "--lm", "openai/x", "--api-base", f"http://127.0.0.1:{port}/v1", "--out", str(tmp_path / "t.json")],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "unreachable" in lines[0] and "Traceback" not in proc.stderr, proc.stderr


def test_local_api_base_gets_a_placeholder_key_remote_keeps_the_provider_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memento.llm.lm import build_lm

    local = build_lm(load_settings(flags={"lm": {"model": "openai/x", "api_base": "http://127.0.0.1:8000/v1"}}).lm)
    assert local.kwargs.get("api_key") == "not-needed"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-provider")
    remote = build_lm(load_settings(flags={"lm": {"model": "openai/x", "api_base": "https://api.example.com/v1"}}).lm)
    assert remote.kwargs.get("api_key") is None


def test_run_parallel_carries_dspy_context() -> None:
    engine = ScriptedEngine(overrides={"answer": "ok"})
    lm = scripted_lm(engine)
    seen: list[object] = []
    lock = threading.Lock()

    def work(i: int) -> str:
        with lock:
            seen.append(dspy.settings.lm)
        return dspy.Predict("question -> answer")(question=str(i)).answer

    with dspy.context(lm=lm):
        out = run_parallel(work, range(6), threads=3)
    assert out == ["ok"] * 6 and all(s is lm for s in seen)


def test_nested_usage_meters_both_count() -> None:
    engine = ScriptedEngine()
    lm = scripted_lm(engine)
    dspy.configure(lm=lm)
    predict = dspy.Predict("question -> answer")
    with UsageMeter() as outer:
        predict(question="a")
        with UsageMeter() as inner:
            run_parallel(lambda q: predict(question=q), ["b", "c", "d"], threads=3)
    assert inner.usage().lm_calls == 3 and inner.usage().prompt_tokens > 0
    assert outer.usage().lm_calls == 4
    assert outer.usage().prompt_tokens > inner.usage().prompt_tokens


@pytest.mark.parametrize(
    ("server_kwargs", "expected"),
    [
        ({"status_sequence": [401]}, "refused the API key"),
        ({"known_models": {"real-model"}}, "does not exist"),
    ],
)
def test_refused_key_and_unknown_model_are_one_line(server_kwargs: dict, expected: str) -> None:
    with OpenAICompatServer(**server_kwargs) as server:
        lm = dspy.LM("openai/x", api_base=server.api_base, api_key="k", cache=False, num_retries=0)
        with pytest.raises(Exception) as info:
            dspy.Predict("question -> answer")(question="q", lm=lm)
    message = explain_lm_error(info.value)
    assert message is not None and expected in message and "\n" not in message


def test_same_provider_role_inherits_the_lm_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMENTO_LM_API_KEY", "sk-local")
    s = load_settings(flags={"lm": {"model": "openai/a", "api_base": "http://127.0.0.1:9/v1"}, "judge_lm": "openai/b"})
    judge = s.role("judge_lm")
    assert (judge.model, judge.api_base, judge.secret()) == ("openai/b", "http://127.0.0.1:9/v1", "sk-local")
    s = load_settings(
        flags={"lm": {"model": "openai/a", "api_base": "http://127.0.0.1:9/v1"}, "judge_lm": "anthropic/c"}
    )
    assert s.role("judge_lm").api_base is None and s.role("judge_lm").secret() is None


def test_usage_add_sums_every_count_and_every_stage_and_role_count() -> None:
    from memento.core.types import StageUsage, Usage

    counts = [name for name, field in Usage.model_fields.items() if field.annotation is int]
    stage_counts = list(StageUsage.model_fields)
    assert len(counts) == 11 and len(stage_counts) == 5
    one = Usage.model_validate(
        {**{name: i + 1 for i, name in enumerate(counts)}, "by_stage": {"solve": {"lm_calls": 1}}}
    )
    two = Usage.model_validate(
        {
            **{name: 100 * (i + 1) for i, name in enumerate(counts)},
            "by_stage": {"solve": dict.fromkeys(stage_counts, 10)},
            "by_role": {"judge_lm": dict.fromkeys(stage_counts, 3)},
        }
    )
    total = one.add(two)
    assert [getattr(total, name) for name in counts] == [101 * (i + 1) for i in range(len(counts))]
    assert total.by_stage["solve"].model_dump() == {n: 11 if n == "lm_calls" else 10 for n in stage_counts}
    assert total.by_role["judge_lm"].model_dump() == dict.fromkeys(stage_counts, 3)
    assert one.lm_calls == 1 and one.by_role == {}  # the operands are left as they were
