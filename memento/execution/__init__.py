"""memento.execution: where work runs: a thread pool carrying DSPy's context (threads), the Ray executor, its
cluster and per-node worker (ray_executor, ray_cluster, forward_worker), one LM budget across the cluster (lm_budget)
and a throwaway PostgreSQL server (local_postgres).

Its public names are imported on first use (:mod:`memento.utils.lazy_exports`): importing one module of
the package does not import the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memento.utils.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memento.execution.forward_worker import ForwardWorker, Outcome, WorkerSpec
    from memento.execution.lm_budget import BudgetClient, LMBudget, role_limits, start_budget
    from memento.execution.local_postgres import LocalPostgres, find_bin_dir, main
    from memento.execution.ray_cluster import RayCluster, RayNode, ray_environment
    from memento.execution.ray_executor import RayExecutor, executor_for, is_shared_location
    from memento.execution.threads import run_parallel

_HOMES: dict[str, str] = {
    "ForwardWorker": "forward_worker",
    "Outcome": "forward_worker",
    "WorkerSpec": "forward_worker",
    "BudgetClient": "lm_budget",
    "LMBudget": "lm_budget",
    "role_limits": "lm_budget",
    "start_budget": "lm_budget",
    "LocalPostgres": "local_postgres",
    "find_bin_dir": "local_postgres",
    "main": "local_postgres",
    "RayCluster": "ray_cluster",
    "RayNode": "ray_cluster",
    "ray_environment": "ray_cluster",
    "RayExecutor": "ray_executor",
    "executor_for": "ray_executor",
    "is_shared_location": "ray_executor",
    "run_parallel": "threads",
}

__all__ = [
    "ForwardWorker",
    "Outcome",
    "WorkerSpec",
    "BudgetClient",
    "LMBudget",
    "role_limits",
    "start_budget",
    "LocalPostgres",
    "find_bin_dir",
    "main",
    "RayCluster",
    "RayNode",
    "ray_environment",
    "RayExecutor",
    "executor_for",
    "is_shared_location",
    "run_parallel",
]

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
