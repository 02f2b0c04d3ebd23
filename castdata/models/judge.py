"""tau2's NL_ASSERTION reward component: a judge model grades a task's natural-language assertions.

As tau2's `NLAssertionsEvaluator`: the judge gets tau2's own system prompt and user prompt (the conversation as
`role: content` lines, the user's own tool calls and their results included where they happened, as tau2's message
list has them; then the assertions), and the component is met when the judge says every assertion is. tau2 asks
`gpt-4o-mini` at temperature 0 (through litellm); castdata asks the `judge:` model spec (any backend; an
OpenAI-compatible endpoint for a hosted judge; its sampling defaults to temperature 0), constrained to the answer's
JSON schema. Stricter than tau2 where tau2 would crash or pass on nothing: an answer that is not that JSON, or that
grades fewer assertions than it was given, judges nothing (`InfrastructureError`: the episode is retried on a rerun,
never scored on a guess).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from castdata.models.base import InfrastructureError
from castdata.records import NLAssertionCheck, UserToolCall

if TYPE_CHECKING:
    from castdata.models.base import Backend

SYSTEM_PROMPT = "\n".join(
    [
        "",
        "        TASK",
        "        - You will be given a list of expected outcomes and a conversation that was collected during a test case run.",
        "        - The conversation is between an agent and a customer.",
        "        - Your job is to evaluate whether the agent satisfies each of the expected outcomes.",
        "        - Grade each expected outcome individually.",
        "",
        "        FORMAT",
        "        - Your response should be a JSON object with the following fields:",
        "        - `reasoning`: a short explanation for your classification",
        "        - `metExpectation`: `true` if the agent satisfies the expected outcomes, `false` otherwise",
        "        - `expectedOutcome`: repeat the expectation from the input that you are grading",
        "        ",
        "        Example response structure:",
        "        {",
        '            "results": [',
        "                {",
        '                    "expectedOutcome": "<one of the expected outcomes from the input>",',
        '                    "reasoning": "<reasoning trace>",',
        '                    "metExpectation": <false or true>,',
        "                }",
        "            ]",
        "        }",
        "        ",
    ]
)

_GRADE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["expectedOutcome", "reasoning", "metExpectation"],
    "properties": {
        "expectedOutcome": {"type": "string"},
        "reasoning": {"type": "string"},
        "metExpectation": {"type": "boolean"},
    },
}
ANSWER_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["results"],
    "properties": {"results": {"type": "array", "items": _GRADE}},
}


class _Grade(BaseModel):
    model_config = ConfigDict(extra="ignore")

    expectedOutcome: str  # tau2's field names
    reasoning: str
    metExpectation: bool


class _Answer(BaseModel):
    results: list[_Grade] = Field(default_factory=list)


def conversation(messages: Sequence[dict[str, Any]], user_calls: Sequence[UserToolCall] = ()) -> str:
    """The conversation as tau2 writes it for its judge: `role: content` per message (no system prompt; a turn
    without text reads `None`), each user tool call as its own `user: None` and `tool: <result>` lines before the
    message it led to."""
    lines = []
    for step, message in enumerate(messages):
        for call in (c for c in user_calls if c.step == step):
            lines += ["user: None", f"tool: {call.content}"]
        if message["role"] != "system":
            lines.append(f"{message['role']}: {message.get('content')}")
    lines += [line for c in user_calls if c.step >= len(messages) for line in ("user: None", f"tool: {c.content}")]
    return "\n".join(lines)


def judge_messages(assertions: Sequence[str], transcript: str) -> list[dict[str, str]]:
    """tau2's two judge messages: its system prompt, then the conversation and the assertions."""
    lines = ["", "conversation:", transcript, "", "expectedOutcomes:", str(list(assertions)), ""]
    user = "\n".join(("        " + line if index else line) for index, line in enumerate(lines))
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


async def judge_assertions(
    judge: Backend,
    assertions: Sequence[str],
    messages: Sequence[dict[str, Any]],
    user_calls: Sequence[UserToolCall] = (),
) -> list[NLAssertionCheck]:
    """The judge's grade of each assertion on an episode's conversation; `InfrastructureError` when its answer
    grades fewer assertions than asked or is not tau2's JSON."""
    reply = await judge.complete(
        judge_messages(assertions, conversation(messages, user_calls)), json_schema=ANSWER_SCHEMA
    )
    try:
        answer = _Answer.model_validate(json.loads(reply.content or ""))
    except ValueError as err:  # a pydantic ValidationError too
        reason = str(err).splitlines()[0]
        raise InfrastructureError(f"judge: the answer is not tau2's JSON of graded assertions ({reason})") from None
    if len(answer.results) < len(assertions):
        raise InfrastructureError(f"judge: graded {len(answer.results)} of {len(assertions)} assertions")
    return [
        NLAssertionCheck(assertion=g.expectedOutcome, met=g.metExpectation, justification=g.reasoning)
        for g in answer.results
    ]
