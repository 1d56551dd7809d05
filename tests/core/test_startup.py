"""A quick start (issue 21 item 5): no heavy library is loaded before a closed-book run makes its first LM request.

``memento run`` runs in a fresh interpreter against a local OpenAI-compatible server; a socket hook in that process
writes the names of the loaded modules at its first connection to the server. The time it takes is measured by
``bench/bench_startup.py``, not here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

HEAVY = ("litellm", "torch", "faiss", "sentence_transformers", "mlflow", "ray")  # ray: only --executor ray

HOOK = textwrap.dedent(
    """
    import json, socket, sys
    port, out = int(sys.argv[1]), sys.argv[2]
    real = socket.socket.connect

    def connect(self, address):
        if isinstance(address, tuple) and address[1] == port and not getattr(connect, "done", False):
            connect.done = True
            with open(out, "w") as f:
                json.dump(sorted(sys.modules), f)
        return real(self, address)

    socket.socket.connect = connect
    from memento.cli import app
    app(args=sys.argv[3:], prog_name="memento")
    """
)


def _run_first_request(openai_server, tmp_path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    out = tmp_path / "modules.json"
    env = {**os.environ, "MEMENTO_LM_CACHE": "false", "MEMENTO_RUN_OUTPUT_DIR": str(tmp_path / "runs")}
    command = [sys.executable, "-c", HOOK, str(openai_server.port), str(out), "run", *args]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    modules = json.loads(out.read_text()) if out.exists() else []
    return done, modules


def test_a_closed_book_run_loads_no_heavy_library_before_its_first_request(engine, openai_server, tmp_path):
    engine.when("Who wrote Dune?", answer="Frank Herbert")
    done, modules = _run_first_request(
        openai_server, tmp_path, "--method", "closed_book", "--task", "qa", "--lm", "openai/x", "--api-base",
        openai_server.api_base, "--question", "Who wrote Dune?",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "answer: Frank Herbert" in done.stdout
    assert modules, "the run made no request to the server"
    loaded = {name.split(".")[0] for name in modules}
    assert "dspy" in loaded and "memento" in loaded  # the hook saw the run itself
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    assert openai_server.chat_requests == 1
