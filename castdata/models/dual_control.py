"""Dual control for the offline scripted models: the user-side gold calls of a task (e.g. `tau2-telecom`).

A task's `user_actions` are its user's gold calls, each with how many of the agent's gold calls come before it;
calls with the same count form one request. The noisy-oracle agent asks for each request at its place in the
gold order ("please do this on your phone: ..."); the scripted user answers a request by running that request's
calls on its phone (tool calls the episode loop executes as the user's), then reports what the phone showed.
"""

from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING, Any

from castdata.models.base import Reply, ToolCall
from castdata.records import Action

if TYPE_CHECKING:
    from castdata.envs import Task

PHONE_REQUEST = "on your phone"


def phone_requests(task: Task) -> list[tuple[int, tuple[Action, ...]]]:
    """The user's gold calls grouped into requests: (agent gold calls before it, the calls), in order."""
    groups: dict[int, list[Action]] = {}
    for before, action in task.user_actions:
        groups.setdefault(before, []).append(action)
    return [(before, tuple(actions)) for before, actions in groups.items()]


def ask(actions: tuple[Action, ...]) -> str:
    """The agent's message asking the user to run `actions` on the phone."""
    steps = "; ".join(
        f"{a.name.replace('_', ' ')} {json.dumps(a.kwargs)}" if a.kwargs else a.name.replace("_", " ") for a in actions
    )
    return f"Please do the following {PHONE_REQUEST} and tell me what you see: {steps}."


def due(requests: list[tuple[int, tuple[Action, ...]]], position: int | None) -> list[str]:
    """Pop the requests due before the agent's gold call at `position` (every one for `None`): the asks."""
    asks = []
    while requests and (position is None or requests[0][0] <= position):
        asks.append(ask(requests.pop(0)[1]))
    return asks


class Phone:
    """The scripted user's side of dual control: runs each requested group of its gold calls once, in order."""

    def __init__(self, task: Task) -> None:
        self.pending = [actions for _, actions in phone_requests(task)]
        self.made = 0

    def resume(self, messages: list[dict[str, Any]]) -> None:
        """Continue a recorded conversation: the requests its user already answered are done."""
        answered = sum(
            1
            for message, after in itertools.pairwise(messages)
            if message["role"] == "assistant"
            and PHONE_REQUEST in (message.get("content") or "").lower()
            and after["role"] == "user"
        )
        del self.pending[:answered]

    def calls_for(self, agent_message: str) -> list[ToolCall] | None:
        """Tool calls answering the agent's message when it asks for the next request, else None."""
        if PHONE_REQUEST not in agent_message.lower() or not self.pending:
            return None
        calls = []
        for action in self.pending.pop(0):
            self.made += 1
            calls.append(
                ToolCall(
                    id=f"user_call_{self.made}",
                    name=action.name,
                    arguments=dict(action.kwargs),
                    raw_arguments=json.dumps(action.kwargs),
                )
            )
        return calls

    @staticmethod
    async def observe(results: list[tuple[ToolCall, str]]) -> Reply:
        """The user's report after its calls: what the phone showed last."""
        shown = results[-1][1].strip().splitlines()[-1] if results and results[-1][1].strip() else "nothing"
        return Reply(content=f"Done. My phone now shows: {shown}")
