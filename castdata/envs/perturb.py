"""Plausible wrong values for the noisy oracle's mistakes (`castdata.models.scripted`) and the known-issue checks
(`castdata.envs.known_issues`): another argument, another write tool, a misread number."""

from __future__ import annotations

import re
from typing import Any

from castdata.records import Action


def other_write_tool(domain, action: Action) -> Action | None:
    """The first other write tool whose required parameters `action` has, called with those arguments."""
    for name in sorted(domain.catalog.write_tools - {action.name}):
        params = domain.tools[name].get_info()["function"]["parameters"]
        required = set(params.get("required", []))
        if required and required <= set(action.kwargs):
            return Action(name=name, kwargs={k: v for k, v in action.kwargs.items() if k in params["properties"]})
    return None


def misread(value: str) -> str:
    """A number as a hasty reader gets it wrong: its first non-zero digit off by one."""
    index = next(i for i, ch in enumerate(value) if ch in "123456789")
    return f"{value[:index]}{int(value[index]) % 9 + 1}{value[index + 1 :]}"


def _alternative(value: Any, visible: str, enum: list[Any] | None, rng) -> Any:
    """Another plausible value: one of the same shape seen in the conversation, another enum value, or a near miss."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        if enum:
            others = [e for e in enum if e != value]
            if others:
                return rng.choice(others)
        shape = re.sub(r"\d", r"\\d", re.escape(value))
        if any(ch.isdigit() for ch in value):
            seen = sorted(set(re.findall(rf"(?<![\w#]){shape}(?!\w)", visible)) - {value})
            if seen:
                return rng.choice(seen)
            return value[:-1] + str((int(value[-1]) + 1) % 10) if value[-1].isdigit() else value + "1"
        return value + " (changed)"
    return None


def perturb_arguments(
    action: Action, visible: str, domain, rng, keys: list[str] | None = None
) -> tuple[Action, str] | None:
    """`action` with one argument (of `keys`, default all, ids first) replaced by a plausible wrong value,
    or None if none can be."""
    props = domain.tools[action.name].get_info()["function"]["parameters"].get("properties", {})
    if keys is None:
        keys = sorted(action.kwargs, key=lambda k: (not k.endswith(("_id", "_ids")), k))
    for key in keys:
        value = action.kwargs[key]
        if isinstance(value, list) and value:
            i = rng.randrange(len(value))
            new_item = _alternative(value[i], visible, None, rng)
            if new_item is not None and new_item != value[i]:
                new = list(value)
                new[i] = new_item
                return Action(
                    name=action.name, kwargs={**action.kwargs, key: new}
                ), f"{key}[{i}]: {value[i]!r} -> {new_item!r}"
            continue
        new_value = _alternative(value, visible, props.get(key, {}).get("enum"), rng)
        if new_value is not None and new_value != value:
            return Action(
                name=action.name, kwargs={**action.kwargs, key: new_value}
            ), f"{key}: {value!r} -> {new_value!r}"
    return None


def without_item(action: Action, index: int) -> tuple[Action, str]:
    """`action` with item `index` left out of every list argument as long as the first one."""
    lists = [key for key, value in action.kwargs.items() if isinstance(value, list)]
    size = len(action.kwargs[lists[0]])
    kwargs = {
        k: ([x for i, x in enumerate(v) if i != index] if k in lists and len(v) == size else v)
        for k, v in action.kwargs.items()
    }
    return Action(name=action.name, kwargs=kwargs), f"{lists[0]}: left out {action.kwargs[lists[0]][index]!r}"
