"""The column types of every dataset config, and their conversion to Arrow tables.

Storage rule: every heterogeneous value (tool-call arguments, tool schemas, action kwargs, model specs,
`chat_template_kwargs`, `extra`) is a `datasets.Json()` value. Arrow stores it as a JSON string (the
`arrow.json` extension type) and `datasets` decodes it back to Python objects on load, so a tool call's
`arguments` is a dict of exactly its own arguments (no struct schema merged across rows) and `tools` is a
list of dicts, as TRL and `tokenizer.apply_chat_template` want them. Everything else is a plain typed column.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from datasets import Features, Json, List, Value

STRING, INT, FLOAT, BOOL = Value("string"), Value("int64"), Value("float64"), Value("bool")

TOOL_CALL = {"id": STRING, "type": STRING, "function": {"name": STRING, "arguments": Json()}}
MESSAGE = {
    "role": STRING,
    "content": STRING,
    "reasoning_content": STRING,
    "tool_calls": List(TOOL_CALL),
    "name": STRING,
    "tool_call_id": STRING,
}
MESSAGES = List(MESSAGE)
TOOLS = List(Json())
ACTION = {"name": STRING, "kwargs": Json()}

EPISODE = {"run": STRING, "trajectory_id": STRING, "task": STRING, "domain": STRING, "agent_model": STRING}
"""Columns every row carries: the run directory's name, the episode id, the task key
(`domain.benchmark_split.task_id`, the unit of the train/validation/test split), the domain and the agent model.
The policy and critic configs also carry `source`: `hindsight` (the labels), `critic` (a guarding critic's
interception, confirmed by hindsight) or `critic_error` (hindsight disagrees with the critic)."""
SOURCES = ("hindsight", "critic", "critic_error")

CONFIGS: dict[str, Features] = {
    "trajectories": Features(
        {
            **EPISODE,
            "benchmark_split": STRING,
            "task_id": INT,
            "trial": INT,
            "seed": INT,
            "agent": Json(),
            "user_model": STRING,
            "user": Json(),
            "tools": TOOLS,
            "messages": MESSAGES,
            "meta": List(
                {
                    "t": FLOAT,
                    "usage": {"prompt_tokens": INT, "completion_tokens": INT, "latency_s": FLOAT, "cost_usd": FLOAT},
                    "violation": STRING,
                    "raw": Json(),
                }
            ),
            "outcome": {
                "reward": FLOAT,
                "db_match": BOOL,
                "outputs_found": List(STRING),
                "outputs_missing": List(STRING),
                "termination_reason": STRING,
                "error": STRING,
                "excluded": STRING,
                "nl_assertions": List({"assertion": STRING, "met": BOOL, "justification": STRING}),
            },
            "privileged": {
                "user_id": STRING,
                "instruction": STRING,
                "gold_actions": List(ACTION),
                "required_outputs": List(STRING),
                "user_gold_actions": List(ACTION),
            },
            "injected_mistakes": List(
                {
                    "kind": STRING,
                    "step": INT,
                    "outcome_breaking": BOOL,
                    "detail": STRING,
                    "intercepted": BOOL,
                    "revision": STRING,
                }
            ),
            "interceptions": List(
                {
                    "step": INT,
                    "attempt": INT,
                    "proposed": Json(),
                    "verdict": STRING,
                    "critique": STRING,
                    "revised": Json(),
                }
            ),
            "critic_calls": List(
                {
                    "step": INT,
                    "attempt": INT,
                    "verdict": STRING,
                    "critique": STRING,
                    "usage": {"prompt_tokens": INT, "completion_tokens": INT, "latency_s": FLOAT, "cost_usd": FLOAT},
                }
            ),
            "imported": Json(),  # where an imported episode came from, and whether it reproduces (null if collected)
            "user_tool_calls": List(
                {"step": INT, "id": STRING, "name": STRING, "arguments": Json(), "content": STRING, "ok": BOOL}
            ),
            "started_at": FLOAT,
            "ended_at": FLOAT,
        }
    ),
    "labels": Features(
        {
            **EPISODE,
            "benchmark_split": STRING,
            "task_id": INT,
            "trial": INT,
            "step": INT,
            "action": ACTION,
            "verdict": STRING,
            "severity": STRING,
            "categories": List(STRING),
            "policy_refs": List({"clause_id": STRING, "quote": STRING}),
            "evidence": List({"step": INT, "source": STRING, "quote": STRING}),
            "rationale": {"observed": STRING, "required": STRING, "assessment": STRING},
            "expected_action": ACTION,
            "label_source": {
                "method": STRING,
                "signals": List(STRING),
                "teacher_model": STRING,
                "mc_success_before": FLOAT,
                "mc_success_after": FLOAT,
                "agreement": BOOL,
            },
            "first_critical_error": BOOL,
            "after_first_error": BOOL,
            "user_fault": BOOL,
            "extra": Json(),
        }
    ),
    "critic_sft": Features(
        {
            "messages": MESSAGES,
            "chat_template_kwargs": Json(),
            **EPISODE,
            "step": INT,
            "verdict": STRING,
            "severity": STRING,
            "categories": List(STRING),
            "source": STRING,
        }
    ),
    "policy_sft": Features(
        {
            "messages": MESSAGES,
            "tools": TOOLS,
            "chat_template_kwargs": Json(),
            **EPISODE,
            "kind": STRING,
            "step": INT,
            "source": STRING,
        }
    ),
    "policy_dpo": Features(
        {
            "prompt": MESSAGES,
            "chosen": MESSAGES,
            "rejected": MESSAGES,
            "tools": TOOLS,
            "chat_template_kwargs": Json(),
            **EPISODE,
            "step": INT,
            "categories": List(STRING),
            "source": STRING,
        }
    ),
    "critic_prm": Features(
        {
            "prompt": STRING,
            "completions": List(STRING),
            "labels": List(BOOL),
            **EPISODE,
            "steps": List(INT),
            "source": STRING,
        }
    ),
}
"""Every config of a castdata dataset, in the order the card lists them."""


def _storage_type(arrow_type: pa.DataType) -> pa.DataType:
    """The type with every extension type (Json) replaced by its storage type (string)."""
    if isinstance(arrow_type, pa.BaseExtensionType):
        return arrow_type.storage_type
    if pa.types.is_struct(arrow_type):
        return pa.struct([field.with_type(_storage_type(field.type)) for field in arrow_type])
    if pa.types.is_list(arrow_type):
        return pa.list_(_storage_type(arrow_type.value_type))
    return arrow_type


def _encoder(feature: Any) -> Callable[[Any], Any] | None:
    """A function giving a value's storage form (every Json part as JSON text), or None when it is stored as is.

    datasets' own `encode_example` is not used: it skips a list of structs whose first item is null.
    """
    if isinstance(feature, Json):
        return lambda value: None if value is None else json.dumps(value, ensure_ascii=False)
    if isinstance(feature, List):
        item = _encoder(feature.feature)
        return None if item is None else lambda value: None if value is None else [item(v) for v in value]
    if isinstance(feature, dict):
        parts = {name: _encoder(sub) for name, sub in feature.items()}
        if not any(parts.values()):
            return None
        return lambda value: (
            None
            if value is None
            else {name: value.get(name) if part is None else part(value.get(name)) for name, part in parts.items()}
        )
    return None


class TableEncoder:
    """Rows (Json values as Python objects) -> a table with the features' schema and metadata."""

    def __init__(self, features: Features) -> None:
        self.schema = features.arrow_schema
        self.storage = pa.schema([field.with_type(_storage_type(field.type)) for field in self.schema])
        self.encoders = {name: _encoder(feature) for name, feature in features.items()}

    def __call__(self, rows: list[dict[str, Any]]) -> pa.Table:
        columns = {
            name: [row.get(name) for row in rows] if encode is None else [encode(row.get(name)) for row in rows]
            for name, encode in self.encoders.items()
        }
        return pa.Table.from_pydict(columns, schema=self.storage).cast(self.schema)
