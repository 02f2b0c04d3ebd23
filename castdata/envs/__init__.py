"""tau-trait and tau2-bench domains behind one adapter (`load_domain`)."""

from castdata.envs.catalog import DOMAINS, SPLITS
from castdata.envs.domain import RESPOND, Domain, Score, Task, ToolResult, UnknownName
from castdata.envs.load import load_domain

__all__ = ["DOMAINS", "RESPOND", "SPLITS", "Domain", "Score", "Task", "ToolResult", "UnknownName", "load_domain"]
