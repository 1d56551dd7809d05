"""A Ray cluster of two nodes on one machine for tests and benchmarks (``ray start`` on loopback addresses)."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["RayNodes"]


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _ray_bin() -> str:
    found = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
    assert found, "the ray command is not installed"
    return found


class RayNodes:
    """A Ray cluster of two nodes on this machine for tests and benches: a head and a second node, each a
    ``ray start --block`` process of its own on a loopback address (Ray replaces 127.0.0.1 by the host's address
    when a cluster may have several nodes), usage statistics off, no dashboard, a small object store, a short temp
    directory, a token of its own; stopped by signalling both processes.

    Example:
        >>> with RayNodes(tmp_path) as cluster:  # doctest: +SKIP
        ...     subprocess.run([..., "--executor", "ray", "--ray-address", cluster.address], env=cluster.env)
    """

    ADDRESSES = ("127.0.0.2", "127.0.0.3")

    def __init__(self, base: Path, *, cpus: int = 4) -> None:
        self.cpus = cpus
        self.token = secrets.token_hex(16)
        self.port = _free_port(self.ADDRESSES[0])
        self.address = f"{self.ADDRESSES[0]}:{self.port}"
        self.temp = tempfile.mkdtemp(prefix="mr2", dir="/tmp")  # socket paths must stay short
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMENTO_", "RAY_"))}
        self.env.update(
            RAY_USAGE_STATS_ENABLED="0",
            RAY_AUTH_MODE="token",
            RAY_AUTH_TOKEN=self.token,
            DSPY_CACHEDIR=str(base / "dspy-cache"),
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            HF_HUB_OFFLINE="1",
        )
        self.procs: list[Any] = []

    def _start(self, *args: str) -> None:
        common = [f"--num-cpus={self.cpus}", "--object-store-memory=80000000", "--disable-usage-stats", "--block"]
        proc = subprocess.Popen(
            [_ray_bin(), "start", *args, *common],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.procs.append(proc)

    def alive_nodes(self) -> int:
        probe = (
            f"import ray; ray.init(address={self.address!r}, _node_ip_address={self.ADDRESSES[0]!r}, "
            "log_to_driver=False); print(sum(1 for n in ray.nodes() if n['Alive']))"
        )
        done = subprocess.run([sys.executable, "-c", probe], env=self.env, capture_output=True, text=True, timeout=120)
        return int(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 and done.stdout.strip() else 0

    def __enter__(self) -> RayNodes:
        head = self.ADDRESSES[0]
        self._start("--head", f"--node-ip-address={head}", f"--port={self.port}", "--include-dashboard=false",
                    f"--temp-dir={self.temp}")  # fmt: skip
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex((head, self.port)) == 0:
                    break
            time.sleep(0.5)
        self._start(f"--address={self.address}", f"--node-ip-address={self.ADDRESSES[1]}")
        while time.monotonic() < deadline and self.alive_nodes() < 2:
            time.sleep(1)
        assert self.alive_nodes() == 2, "the second node did not join"
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        shutil.rmtree(self.temp, ignore_errors=True)
