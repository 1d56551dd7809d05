"""memento.execution: where work runs: a thread pool carrying DSPy's context (threads), the Ray executor, its
cluster and per-node worker (ray_executor, ray_cluster, forward_worker), one LM budget across the cluster
(lm_budget) and a throwaway PostgreSQL server (local_postgres).

Its main names import from here, lazily: ``memento.execution.run_parallel`` loads no Ray.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memento.utils.lazy_exports import homes_by_module, lazy_exports

if TYPE_CHECKING:
    from memento.execution.forward_worker import WorkerSpec
    from memento.execution.lm_budget import LMBudget
    from memento.execution.local_postgres import LocalPostgres
    from memento.execution.ray_cluster import RayCluster
    from memento.execution.ray_executor import RayExecutor, executor_for
    from memento.execution.threads import run_parallel

_HOMES = homes_by_module(
    {
        "threads": ("run_parallel",),
        "ray_executor": ("RayExecutor", "executor_for"),
        "ray_cluster": ("RayCluster",),
        "forward_worker": ("WorkerSpec",),
        "lm_budget": ("LMBudget",),
        "local_postgres": ("LocalPostgres",),
    }
)

# fmt: off
__all__ = [
    "LMBudget", "LocalPostgres", "RayCluster", "RayExecutor", "WorkerSpec", "executor_for", "run_parallel",
]
# fmt: on

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
