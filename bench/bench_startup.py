"""Start-up time: from process start to the first LM request, ``memento run`` against a bare ``dspy.Predict``.

A local OpenAI-compatible server (``memento.testing.OpenAICompatServer``, scripted answers, 127.0.0.1) notes when
each chat request arrives. Each trial starts a fresh interpreter and times, on the bench's clock:

* **baseline**: ``python -c "import dspy; dspy.Predict('question -> answer')(question=..., lm=dspy.LM('openai/x',
  api_base=...))"``: the whole round trip, process start to exit (what the issue calls a bare ``dspy.Predict``
  round trip);
* **memento run**: ``memento run --method closed_book --task qa ... --lm openai/x --api-base URL`` (the console
  script): process start to the arrival of its first LM request, and to its exit.

Trials alternate (baseline, memento, baseline, ...) so both see the same machine load; the medians and the ratio
(memento's first request / baseline round trip; the target is at most 2) are printed. DSPy's cache is off in both
(``cache=False``, ``MEMENTO_LM_CACHE=false``), so every trial reaches the server.

``--method aet --corpus examples/multihop/corpus.jsonl`` times the default method instead (its first request is the
decomposition, after the web layer and the offline corpus are opened).

Run: python bench/bench_startup.py [--trials 7] [--method closed_book] [--corpus FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from memento.testing import OpenAICompatServer, ScriptedEngine  # noqa: E402

QUESTION = "Who wrote Dune?"

BASELINE = """
import sys, dspy
lm = dspy.LM("openai/x", api_base=sys.argv[1], api_key="not-needed", cache=False)
print(dspy.Predict("question -> answer")(question=sys.argv[2], lm=lm).answer)
"""


class _Arrivals(ScriptedEngine):
    """A scripted engine that notes the wall-clock time of every request it answers."""

    def __init__(self) -> None:
        super().__init__(overrides={"answer": "Frank Herbert"})
        self.times: list[float] = []
        self.arrived = threading.Condition()

    def reply(
        self, system: str, messages: list[dict[str, str]], *, response_format: dict[str, Any] | None = None
    ) -> str:
        with self.arrived:
            self.times.append(time.time())
            self.arrived.notify_all()
        return super().reply(system, messages)


def _trial(command: list[str], engine: _Arrivals, env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(seconds to the first request, seconds to exit) of one fresh process."""
    seen = len(engine.times)
    started = time.time()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    ended = time.time()
    if done.returncode != 0 or len(engine.times) <= seen:
        raise SystemExit(f"trial failed ({' '.join(command[:3])} ...): {done.stderr.strip()[-500:]}")
    return engine.times[seen] - started, ended - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=7)
    parser.add_argument("--method", default="closed_book", help="the method memento run uses (closed_book)")
    parser.add_argument("--corpus", default=None, help="an offline corpus for a method that searches (aet)")
    args = parser.parse_args()
    memento = shutil.which("memento") or str(Path(sys.executable).with_name("memento"))
    engine = _Arrivals()
    with OpenAICompatServer(engine) as server, tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "MEMENTO_LM_CACHE": "false", "MEMENTO_RUN_OUTPUT_DIR": str(Path(tmp) / "runs")}
        env.pop("MEMENTO_LM", None)
        baseline_cmd = [sys.executable, "-c", BASELINE, server.api_base, QUESTION]
        memento_cmd = [memento, "run", "--method", args.method, "--task", "qa", "--lm", "openai/x",
                       "--api-base", server.api_base, "--question", QUESTION]  # fmt: skip
        if args.corpus:
            memento_cmd += ["--corpus", str(Path(args.corpus).resolve())]
        _trial(baseline_cmd, engine, env, Path(tmp))  # warm the OS file cache for both
        _trial(memento_cmd, engine, env, Path(tmp))
        base_total, first, total = [], [], []
        for i in range(args.trials):
            base_total.append(_trial(baseline_cmd, engine, env, Path(tmp))[1])
            f, t = _trial(memento_cmd, engine, env, Path(tmp))
            first.append(f)
            total.append(t)
            print(f"trial {i + 1}: baseline round trip {base_total[-1]:.2f}s, memento first request {f:.2f}s "
                  f"(exit {t:.2f}s)", flush=True)  # fmt: skip
    b, f, t = statistics.median(base_total), statistics.median(first), statistics.median(total)
    print()
    print(f"| measure (median of {args.trials} fresh processes) | seconds |")
    print("|---|---:|")
    print(f"| bare `dspy.Predict` round trip (start to exit) | {b:.2f} |")
    print(f"| `memento run` {args.method}: start to first LM request | {f:.2f} |")
    print(f"| `memento run` {args.method}: start to exit | {t:.2f} |")
    print(f"| ratio first request / bare round trip (target <= 2) | {f / b:.2f} |")


if __name__ == "__main__":
    main()
