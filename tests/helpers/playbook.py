"""A loopback server's deterministic agent and user, for collecting with the openai backend.

A `Playbook` answers every request from the request alone: as the user (recognised by the simulator's system
prompt) it reuses the scripted user; as the agent it replays the noisy-oracle plan of the task named in the user's
opening line (with planned mistakes, so some episodes fail), retrying a move after a malformed call. So retries
and faults cannot change the play, and a faulty run must reach the same rewards as a clean one.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import yaml

from castdata.envs import load_domain
from castdata.models.base import EpisodeContext
from castdata.models.scripted import NoisyOracleAgent, ScriptedUser
from castdata.models.user_llm import USER_ROLE
from helpers.openai_server import ChatServer

KEY_ENV = "CASTDATA_TEST_COLLECT_KEY"
KEY = "sk-test-collect-0123456789abcdef"
TICKET = re.compile(r"\[ticket (\w+)/(\w+)/(\d+)\]")
MALFORMED_OBSERVATION = "Error: the arguments of"
MISTAKES = {"premature_end": 0.7, "missing_output": 0.5}  # with seed 0: tasks 2 and 3 end too early


class Playbook:
    """A deterministic agent and user for the loopback server (see the module docstring)."""

    def __init__(self, domain: str, split: str) -> None:
        self.domain = load_domain(domain)
        self.by_instruction = {task.instruction: task for task in self.domain.tasks(split)}

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        return self.user(messages) if messages[0]["content"].startswith(USER_ROLE) else self.agent(messages)

    def user(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        task = next(t for text, t in self.by_instruction.items() if f"Instruction: {text}\n" in messages[0]["content"])
        if len(messages) == 2:
            return {"content": f"Hi! I need help with a request. [ticket {task.domain}/{task.split}/{task.index}]"}
        user = ScriptedUser(EpisodeContext(self.domain, task, seed=0))
        user.resume([{"role": "user", "content": m["content"]} for m in messages if m["role"] == "assistant"])
        user.stated = max(user.stated, 1)  # the ticket line opened with its first goal
        answer = asyncio.run(user.reply(messages[-1]["content"]))
        return {"content": answer.content}

    def agent(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        _, split, index = TICKET.search(messages[1]["content"]).groups()
        plan = NoisyOracleAgent(
            EpisodeContext(self.domain, self.domain.task(split, int(index)), seed=0), MISTAKES
        ).moves
        done = sum(
            1
            for i, message in enumerate(messages)
            if message["role"] == "assistant"
            and not (
                i + 1 < len(messages) and str(messages[i + 1].get("content", "")).startswith(MALFORMED_OBSERVATION)
            )
        )
        if done >= len(plan):
            return {"content": "Thank you for contacting us. Is there anything else I can help you with?"}
        move = plan[done]
        if move.say is not None:
            return {"content": move.say}
        return {"tool_calls": [{"function": {"name": a.name, "arguments": a.kwargs}} for a in move.calls]}


def write_config(path: Path, server: ChatServer, max_retries: int = 12) -> Path:
    endpoint = {
        "backend": "openai",
        "base_url": server.base_url,
        "api_key_env": KEY_ENV,
        "max_retries": max_retries,
        "options": {"retry_backoff_s": 0.002},
    }
    config = {
        "domains": ["retail"],
        "split": "test",
        "tasks": "0-3",
        "trials": 2,
        "seed": 0,
        "concurrency": 8,
        "max_steps": 40,
        "agent": {**endpoint, "model": "agent-model", "price_in_per_mtok": 1.0, "price_out_per_mtok": 4.0},
        "user": {**endpoint, "model": "user-model"},
    }
    path.write_text(yaml.safe_dump(config))
    return path
