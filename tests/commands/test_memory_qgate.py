"""`memento memory qgate-stats`: AUC report on logged pairs (prequential, held-out refit, cosine), errors."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from memento.cli import app
from memento.memory.case_bank import CaseBank
from memento.memory.q_gate import gate_report
from memento.testing import LookupEmbedder


def _bank_with_pairs(path, *, tasks: int = 120, dim: int = 16) -> CaseBank:
    """Cases and queries carry hidden signs along orthogonal directions; a case helps iff the signs agree."""
    rng = np.random.default_rng(0)
    basis, _ = np.linalg.qr(rng.standard_normal((dim, 2)))
    u, v = basis[:, 0], basis[:, 1]

    def draw(direction):
        g = rng.standard_normal(dim)
        g -= (g @ u) * u + (g @ v) * v
        g /= np.linalg.norm(g)
        sign = float(rng.choice([-1.0, 1.0]))
        x = g + 0.4 * sign * direction
        return (x / np.linalg.norm(x)).astype(np.float32), sign

    emb = LookupEmbedder(dim)
    bank = CaseBank(path, emb, seed=0, gate_options={"lr": 3e-3})
    signs = {}
    for j in range(60):
        vec, sign = draw(v)
        emb.table[f"case {j}"] = vec
        signs[bank.add(f"case {j}", f"plan {j}", reward=1.0).id] = sign
    for t in range(tasks):
        vec, sign = draw(u)
        emb.table[f"query {t}"] = vec
        hits = bank.retrieve(f"query {t}", k=4, policy="softmax", alpha=3.0, prefilter=20, seed=t)
        bank.record(f"query {t}", [c for c, _ in hits], [float(signs[c.id] == sign) for c, _ in hits])
    return bank


def test_qgate_stats_reports_gate_beating_cosine(tmp_path):
    bank = _bank_with_pairs(tmp_path / "mem" / "cbr")
    bank.close()
    result = CliRunner().invoke(app, ["memory", "qgate-stats", "--memory", str(tmp_path / "mem"), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["pairs"] == 480 and report["cases"] == 60 and report["gate_updates"] == 120
    assert report["prequential_pairs"] == 476  # the first task's pairs were scored by an untrained gate
    assert report["prequential_auc"] > 0.75
    assert report["holdout_pairs"] == 96 and report["holdout_auc"] > 0.85
    # cosine does not predict usefulness here (retrieval selection can even push it below 0.5)
    assert report["holdout_cosine_auc"] < 0.7 and report["cosine_auc"] < 0.6  # (96 held-out pairs: noisy)
    # the table form names the same figures; the bank itself is untouched (frozen open writes nothing)
    mtime = (tmp_path / "mem" / "cbr" / "qgate.pt").stat().st_mtime_ns
    table = CliRunner().invoke(app, ["memory", "qgate-stats", "--memory", str(tmp_path / "mem" / "cbr")])
    assert table.exit_code == 0 and "prequential AUC" in table.stdout and "cosine" in table.stdout
    assert (tmp_path / "mem" / "cbr" / "qgate.pt").stat().st_mtime_ns == mtime


def test_qgate_stats_on_a_directory_without_a_bank_is_one_line_error(tmp_path):
    result = CliRunner().invoke(app, ["memory", "qgate-stats", "--memory", str(tmp_path)])
    assert result.exit_code == 1
    assert "no case bank under" in result.output and len(result.output.strip().splitlines()) == 1


def test_gate_report_with_no_scored_pairs_is_nan_not_crash():
    pairs = {
        "q": np.zeros((3, 4), dtype=np.float32),
        "c": np.zeros((3, 4), dtype=np.float32),
        "reward": np.array([1.0, 0.0, 1.0]),
        "q_score": np.full(3, np.nan),
        "cosine": np.array([0.1, 0.2, 0.3]),
    }
    report = gate_report(pairs, holdout=0.2)
    assert report["pairs"] == 3 and report["prequential_pairs"] == 0
    assert np.isnan(report["prequential_auc"]) and np.isnan(report["holdout_auc"])


def test_useful_means_reward_strictly_above_the_configured_threshold(tmp_path):
    """qgate-stats counts a pair useful when its reward is strictly above ``[trainer] success_threshold``."""
    pairs = {
        "q": np.zeros((4, 2), dtype=np.float32),
        "c": np.zeros((4, 2), dtype=np.float32),
        "reward": np.array([0.5, 0.5, 1.0, 0.0]),
        "q_score": np.full(4, np.nan),
        "cosine": np.array([0.9, 0.8, 0.7, 0.1]),
    }
    report = gate_report(pairs, holdout=0.2)
    assert report["positive_rate"] == 0.25 and report["threshold"] == 0.5
    assert gate_report(pairs, holdout=0.2, threshold=0.25)["positive_rate"] == 0.75
    bank = _bank_with_pairs(tmp_path / "cbr", tasks=8)
    bank.close()
    config = tmp_path / "memento.toml"
    config.write_text("[trainer]\nsuccess_threshold = 0.0\n")
    result = CliRunner().invoke(
        app, ["memory", "qgate-stats", "--memory", str(tmp_path / "cbr"), "--config", str(config)]
    )
    assert result.exit_code == 0, result.output
    assert "useful share (reward > 0)" in result.stdout


def test_qgate_fit_and_case_reward_from_the_cli(tmp_path):
    """fit_gate and update_reward were reachable only from Python (issue 24 item 3)."""
    bank = _bank_with_pairs(tmp_path / "mem" / "cbr", tasks=10)
    case = bank.cases()[0]
    bank.close()
    gate = tmp_path / "mem" / "cbr" / "qgate.pt"
    before = gate.stat().st_mtime_ns
    fit = CliRunner().invoke(app, ["memory", "qgate-fit", "--memory", str(tmp_path / "mem"), "--epochs", "2"])
    assert fit.exit_code == 0, fit.output
    assert "fitted on 40 logged pairs (2 epochs" in fit.stdout and gate.stat().st_mtime_ns != before
    reward = CliRunner().invoke(
        app, ["memory", "case-reward", "--memory", str(tmp_path / "mem"), "--case", case.id, "--reward", "0.25"]
    )
    assert reward.exit_code == 0, reward.output
    assert f"case {case.id}: reward 1.00 -> 0.25" in reward.stdout
    from memento.memory.case_bank import StoredEmbedder

    path = tmp_path / "mem" / "cbr"
    assert CaseBank(path, StoredEmbedder.of(path), frozen=True).get(case.id).reward == 0.25
    unknown = CliRunner().invoke(
        app, ["memory", "case-reward", "--memory", str(tmp_path / "mem"), "--case", "case-x", "--reward", "0.5"]
    )
    assert unknown.exit_code == 1 and "no case 'case-x'" in unknown.output
    assert len(unknown.output.strip().splitlines()) == 1
