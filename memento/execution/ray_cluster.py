"""The Ray cluster a command's forward passes run on: a local one started for the command, or an existing one.

A local cluster is one node bound to the loopback address (``127.0.0.1``), with usage statistics off (Ray's probe
reaches public hosts), no dashboard, a small object store (the default reserves 30% of memory) in a short temp
directory (Unix socket paths are limited to about 107 characters), token authentication with a token made for the
command, and ``run.ray_cpus`` logical CPUs: tasks wait on the LM, so more than the real cores. An existing cluster
(``run.ray_address``: ``host:port``, ``auto``, ``ray://host:10001``) is joined as a driver and left running.

Example:
    >>> with RayCluster(settings.run) as cluster:  # doctest: +SKIP
    ...     [node.address for node in cluster.nodes()]
    ['127.0.0.1']
"""

from __future__ import annotations

import ipaddress
import logging
import os
import secrets
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any, Self

from memento.core.errors import ConfigError
from memento.utils.extras import require

__all__ = ["RayCluster", "RayNode", "ray_environment"]

logger = logging.getLogger(__name__)

_OBJECT_STORE_BYTES = 100 * 1024 * 1024  # results are small JSON-like records; Ray's minimum is ~75 MB


@dataclass(frozen=True)
class RayNode:
    """An alive node of the cluster that can run tasks."""

    node_id: str
    address: str
    cpus: float


def ray_environment() -> dict[str, str]:
    """The environment a memento Ray process needs on these machines: usage statistics off, token authentication."""
    env = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "token")}
    return env


def _loopback_host(address: str) -> str | None:
    """The host of ``host:port`` when it is a loopback IP (the driver then runs on that node's address)."""
    host = address.rsplit(":", 1)[0] if ":" in address else address
    try:
        return host if ipaddress.ip_address(host).is_loopback else None
    except ValueError:
        return None


class RayCluster:
    """Start (``address=None``) or join the cluster; :meth:`nodes` lists its nodes; leaving stops what was started.

    Args:
        run: the ``[run]`` settings (``ray_address``, ``ray_cpus``).
    """

    def __init__(self, run: Any) -> None:
        self.address: str | None = run.ray_address
        self.cpus = int(run.ray_cpus)
        self.started = False
        self._temp_dir: str | None = None
        self._env_set: list[str] = []

    def _setenv(self, key: str, value: str) -> None:
        if key not in os.environ:
            os.environ[key] = value
            self._env_set.append(key)

    def __enter__(self) -> Self:
        require("ray", "--executor ray")
        for key, value in ray_environment().items():
            self._setenv(key, value)
        if self.address is None:
            self._setenv("RAY_AUTH_TOKEN", secrets.token_hex(16))  # this command's cluster: its own token
            # a single-node cluster keeps every address on the loopback (else Ray swaps 127.0.0.1 for the host's
            # address); read when ray is first imported
            self._setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        import ray

        if ray.is_initialized():  # a caller (a test, a notebook) already connected this process: use that cluster
            return self
        if self.address is None:
            self._temp_dir = tempfile.mkdtemp(prefix="mray", dir="/tmp" if os.path.isdir("/tmp") else None)
            logger.info("starting a local Ray cluster (%d logical CPUs) in %s", self.cpus, self._temp_dir)
            ray.init(
                address="local",
                num_cpus=self.cpus,
                include_dashboard=False,
                object_store_memory=_OBJECT_STORE_BYTES,
                _temp_dir=self._temp_dir,
                _node_ip_address="127.0.0.1",
                configure_logging=False,
                log_to_driver=True,
            )
            self.started = True
        else:
            kwargs: dict[str, Any] = {"address": self.address, "configure_logging": False, "log_to_driver": True}
            host = _loopback_host(self.address)
            if host is not None:
                kwargs["_node_ip_address"] = host
            try:
                ray.init(**kwargs)
            except Exception as exc:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, AuthenticationError
                raise ConfigError(
                    f"--ray-address {self.address}: cannot join the Ray cluster ({type(exc).__name__}: "
                    f"{str(exc).splitlines()[0] if str(exc) else ''})"
                ) from None
            self.started = True  # connected: disconnect on leaving (the cluster itself keeps running)
        return self

    def nodes(self) -> list[RayNode]:
        """The alive nodes with CPUs, by address."""
        import ray

        out = []
        for node in ray.nodes():
            cpus = float((node.get("Resources") or {}).get("CPU", 0))
            if node.get("Alive") and cpus > 0:
                out.append(RayNode(node_id=node["NodeID"], address=str(node.get("NodeManagerAddress")), cpus=cpus))
        return sorted(out, key=lambda n: (n.address, n.node_id))

    def __exit__(self, *exc: object) -> None:
        import ray

        if self.started:
            self.started = False
            ray.shutdown()
        for key in self._env_set:
            os.environ.pop(key, None)
        self._env_set = []
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None
