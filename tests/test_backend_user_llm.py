"""The LLM user simulator over the openai backend: its prompt, flipped roles, persona traits, empty replies."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from helpers.openai_server import ChatServer

from castdata.envs import load_domain
from castdata.errors import ConfigError
from castdata.models.base import EpisodeContext, ModelOutputError
from castdata.models.openai_backend import OpenAIBackend
from castdata.models.spec import ModelSpec
from castdata.models.user_llm import AGENT_GREETING, EMPTY_RETRIES, TRAITS, USER_ROLE, parse_traits


def context() -> EpisodeContext:
    domain = load_domain("retail")
    return EpisodeContext(domain=domain, task=domain.task("test", 0), seed=11)


def talk(server: ChatServer, agent_turns: list[str | None], **options: Any) -> list[str]:
    """The user's replies to `agent_turns` (None opens the conversation)."""
    spec = ModelSpec(backend="openai", model="user-model", base_url=server.base_url, options=options)

    async def main() -> list[str]:
        backend = OpenAIBackend(spec)
        try:
            user = backend.user_session(context())
            return [(await user.reply(turn)).content for turn in agent_turns]
        finally:
            await backend.aclose()

    return asyncio.run(main())


def test_prompt_holds_instruction_rules_and_flips_roles() -> None:
    with ChatServer(lambda body: {"content": f"user line {len(body['messages'])}"}) as server:
        replies = talk(server, [None, "Can I have your email?"])
        first, second = server.stats.requests
    instruction = context().task.instruction
    system = first["messages"][0]["content"]
    assert system.startswith(USER_ROLE) and f"Instruction: {instruction}" in system
    assert "###STOP###" in system and "###TRANSFER###" in system and "Persona" not in system
    assert first["messages"][1:] == [{"role": "user", "content": AGENT_GREETING}]
    assert second["messages"][2:] == [
        {"role": "assistant", "content": replies[0]},
        {"role": "user", "content": "Can I have your email?"},
    ]
    assert "tools" not in first


def test_traits_are_rendered_into_the_prompt() -> None:
    with ChatServer(lambda body: {"content": "hi"}) as server:
        talk(server, [None], traits={"impatience": 3, "skeptical": 1, "confusion": 0})
        system = server.stats.requests[0]["messages"][0]["content"]
    assert TRAITS["impatience"][2] in system and TRAITS["skeptical"][0] in system
    assert not any(text in system for text in TRAITS["confusion"])


@pytest.mark.parametrize(
    "traits, message",
    [
        ({"grumpiness": 1}, "unknown trait 'grumpiness'"),
        ({"impatience": 4}, "level must be"),
        ({"impatience": True}, "level must be"),
        ([], "must map"),
    ],
)
def test_bad_traits_are_config_errors(traits: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_traits(traits)


def test_empty_reply_is_retried() -> None:
    answers = iter(["", "  ", "Hello, I need help."])
    with ChatServer(lambda body: {"content": next(answers)}) as server:
        assert talk(server, [None]) == ["Hello, I need help."]
        assert server.stats.total == 3


def test_empty_replies_end_as_user_error() -> None:
    with ChatServer(lambda body: {"content": ""}) as server:
        with pytest.raises(ModelOutputError, match="empty reply") as caught:
            talk(server, [None])
        assert server.stats.total == 1 + EMPTY_RETRIES
    assert caught.value.role == "user"
