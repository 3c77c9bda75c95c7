"""Net executors, registered by ``NetDef.type``: simple, dag, prof_dag (and Caffe2 aliases)."""

from framework.net.executors import dag, prof, simple  # noqa: F401  (registration)
from framework.net.executors.dag import DAGNet
from framework.net.executors.prof import OpStats, ProfDAGNet, ProfStats
from framework.net.executors.simple import SimpleNet

__all__ = ["DAGNet", "OpStats", "ProfDAGNet", "ProfStats", "SimpleNet"]
