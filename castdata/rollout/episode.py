"""The episode loop (the orchestrator): agent turns, tool execution, user turns, termination, scoring.

An agent turn is one message to the user or one tool call. When a model emits several tool calls, or a
tool call together with text, only the first call is executed (as tau-bench does) and the violation is
recorded in the message's `meta`. A critic-guarded agent (`castdata.critic.guard`) hands the loop only the
proposals its critic accepted (or revised), so nothing it intercepted executes; its interceptions are recorded.

With `prefix` (the first messages of a recorded transcript of the same task), the episode continues from
there, e.g. for Monte-Carlo labels: the prefix's tool calls run again on a fresh database under the episode
clock (their observations recomputed), sessions that keep state learn the conversation so far through their
`resume(messages)` method when they have one, a trailing agent message gets the user's answer, and the loop
goes on.

Dual control (`tau2-telecom`): a user reply may be tool calls on the user's own device. They run as the user's
(`Domain.execute(..., requestor="user")`), go to the record's `user_tool_calls` (never to `messages`, which
stay what the agent saw), and their results go back to the user session's `observe` until it says something.
A continued prefix reruns the recorded episode's user calls (`prefix_user_calls`) where they happened, so the
continuation starts in the state the recorded episode had reached.

tau2's NL_ASSERTION (a task whose reward basis has natural-language assertions): with a `judge` backend, the judge
grades them on the finished conversation (`castdata.models.judge`), and the grades go to `outcome.nl_assertions`;
without one the episode is reported as not judged (`outcome.excluded`). An episode that ended so that it scores 0
(e.g. `max_steps`) is not judged, as in tau2.
"""

from __future__ import annotations

import json
import time
from typing import Any

from castdata.envs import Domain, Task, ToolResult
from castdata.envs.clock import episode_clock
from castdata.envs.domain import Executed
from castdata.envs.reproduce import calls_in_order
from castdata.messages import Call, first_call, is_agent_text
from castdata.models.base import (
    Backend,
    EpisodeContext,
    InfrastructureError,
    ModelOutputError,
    Reply,
    ToolCall,
    UserSession,
)
from castdata.models.judge import judge_assertions
from castdata.models.spec import ModelSpec
from castdata.records import MessageMeta, Outcome, Privileged, Trajectory, Usage, UserToolCall, episode_id

STOP = "###STOP###"
TRANSFER = "###TRANSFER###"
MAX_USER_TOOL_ROUNDS = 10  # dual control: tool-call turns a user may take before it must say something


class _Transcript:
    """Messages as the agent sees them, with their parallel `meta`."""

    def __init__(self, system_prompt: str) -> None:
        self.messages: list[dict[str, Any]] = []
        self.meta: list[MessageMeta] = []
        self.user_tool_calls: list[UserToolCall] = []  # dual control: the user's own calls, which the agent never sees
        self.add({"role": "system", "content": system_prompt})

    def add(
        self, message: dict[str, Any], reply: Reply | None = None, violation: str | None = None, raw: Any = None
    ) -> None:
        self.messages.append(message)
        self.meta.append(MessageMeta(t=time.time(), usage=reply.usage if reply else None, violation=violation, raw=raw))

    def agent_said(self) -> list[str]:
        return [m["content"] for m in self.messages if is_agent_text(m) and m.get("content")]


def system_prompt(domain: Domain) -> str:
    """The agent's system prompt: the domain policy."""
    return domain.policy


async def run_episode(
    domain: Domain,
    task: Task,
    trial: int,
    seed: int,
    agent: Backend,
    user: Backend,
    agent_spec: ModelSpec,
    user_spec: ModelSpec,
    max_steps: int = 30,
    max_errors: int = 5,
    prefix: list[dict[str, Any]] | None = None,
    prefix_user_calls: list[UserToolCall] | tuple[UserToolCall, ...] = (),
    judge: Backend | None = None,
) -> Trajectory:
    """Run one episode of `task` (continuing `prefix`, with the user's own calls `prefix_user_calls`, when given)
    and return its record; `judge` grades tau2's natural-language assertions."""
    started = time.time()
    ctx = EpisodeContext(domain=domain, task=task, seed=seed)
    agent_session, user_session = agent.agent_session(ctx), user.user_session(ctx)
    ordered = calls_in_order(prefix or [], prefix_user_calls)
    replayed = domain.replay([(requestor, call.action) for _, requestor, call in ordered], task)  # the prefix's calls
    db = replayed.db
    transcript = _Transcript(system_prompt(domain))
    reason, error, steps, errors = None, None, 0, 0
    with episode_clock():
        try:
            if prefix is None:
                first = await user_session.reply(None)
                transcript.add({"role": "user", "content": first.content or ""}, first)
            else:
                steps, errors, reason = _continue(domain, transcript, prefix, ordered, replayed.calls)
                for session in (agent_session, user_session):
                    session.resume(transcript.messages)
                last = transcript.messages[-1]
                if reason is None and is_agent_text(last):
                    reason = await _user_turn(user_session, transcript, last["content"] or "", domain, db)
            while reason is None:
                if steps >= max_steps:
                    reason = "max_steps"
                    break
                reply = await agent_session.act(transcript.messages, domain.tool_schemas)
                steps += 1
                if reply.tool_calls:
                    ok, reason = _tool_turn(domain, db, transcript, reply)
                    errors += 0 if ok else 1
                    if reason is None and errors > max_errors:
                        reason = "too_many_errors"
                    continue
                text = reply.content or ""
                transcript.add({"role": "assistant", "content": text}, reply, violation=None if text else "empty_reply")
                reason = await _user_turn(user_session, transcript, text, domain, db)
        except InfrastructureError as err:
            reason, error = "infrastructure_error", str(err)
        except ModelOutputError as err:
            reason, error = f"{err.role}_error", str(err)
    premature = reason in domain.zero_reward_terminations  # scores 0 whatever else: nothing to judge
    judged = None
    if judge is not None and domain.nl_assertions(task) and not premature:
        try:
            judged = await judge_assertions(
                judge, domain.nl_assertions(task), transcript.messages, transcript.user_tool_calls
            )
        except InfrastructureError as err:
            reason, error, premature = "infrastructure_error", str(err), True
    score = domain.score(task, db, transcript.agent_said(), judged)
    injected = sorted([*agent_session.injected, *user_session.injected], key=lambda m: m.step)  # user: user_deviation
    return Trajectory(
        id=episode_id(domain.name, task.split, task.index, trial),
        domain=domain.name,
        split=task.split,
        task_id=task.index,
        trial=trial,
        seed=seed,
        agent=agent_spec,
        user=user_spec,
        tools=domain.tool_schemas,
        messages=transcript.messages,
        meta=transcript.meta,
        outcome=Outcome(
            reward=0.0 if premature else score.reward,
            db_match=score.db_match,
            outputs_found=list(score.outputs_found),
            outputs_missing=list(score.outputs_missing),
            termination_reason=reason,
            error=error,
            excluded=None if premature else score.excluded,
            nl_assertions=judged or [],
        ),
        privileged=Privileged.of(task),
        injected_mistakes=list(injected),
        interceptions=list(agent_session.interceptions),
        critic_calls=list(agent_session.critic_calls),
        user_tool_calls=transcript.user_tool_calls,
        started_at=started,
        ended_at=time.time(),
    )


async def _user_turn(user_session: UserSession, transcript: _Transcript, text: str, domain: Domain, db) -> str | None:
    """The user answers the agent's message `text` (in dual control, after running its own tools); returns the
    termination reason the answer gives, or None."""
    answer = await _user_tools(user_session, transcript, await user_session.reply(text), domain, db)
    transcript.add({"role": "user", "content": answer.content or ""}, answer)
    for mistake in user_session.injected:  # a scripted user's deviation: this message
        if mistake.step < 0:
            mistake.step = len(transcript.messages) - 1
    if STOP in (answer.content or ""):
        return "user_stop"
    return "transfer" if TRANSFER in (answer.content or "") else None


async def _user_tools(user_session: UserSession, transcript: _Transcript, answer: Reply, domain: Domain, db) -> Reply:
    """Run the user's tool calls on its own device, hand it the results (`observe`), until it says something."""
    usage = answer.usage or Usage()
    for _ in range(MAX_USER_TOOL_ROUNDS):
        if not answer.tool_calls:
            answer.usage = usage
            return answer
        results = []
        for call in answer.tool_calls:
            if call.arguments is None:
                observation, ok = f"Error: the arguments of '{call.name}' are not a JSON object", False
            else:
                result = domain.execute(db, call.name, call.arguments, "user")
                observation, ok = result.observation, result.ok
            step = len(transcript.messages)
            transcript.user_tool_calls.append(
                UserToolCall(
                    step=step, id=call.id, name=call.name, arguments=call.arguments or {}, content=observation, ok=ok
                )
            )
            results.append((call, observation))
        answer = await user_session.observe(results)
        usage = usage + (answer.usage or Usage())
    raise ModelOutputError("user", f"the user made tool calls {MAX_USER_TOOL_ROUNDS} turns in a row without a message")


def _continue(
    domain: Domain,
    transcript: _Transcript,
    prefix: list[dict[str, Any]],
    ordered: list[tuple[int, str, Call | UserToolCall]],
    replayed: list[Executed],
) -> tuple[int, int, str | None]:
    """Continue `transcript` (the system prompt) with a recorded prefix whose tool calls (`ordered`, the user's own
    included) were `replayed` (their results recomputed); returns (agent turns, failed tool calls, termination
    reason or None)."""
    steps, errors, reason = 0, 0, None
    users = [(call, done.result) for (_, requestor, call), done in zip(ordered, replayed) if requestor == "user"]
    results = iter(done.result for (_, requestor, _), done in zip(ordered, replayed) if requestor != "user")
    for message in [*prefix[1:], None]:
        while users and (message is None or users[0][0].step <= len(transcript.messages)):
            call, result = users.pop(0)
            transcript.user_tool_calls.append(call.model_copy(update={"content": result.observation, "ok": result.ok}))
        if message is None or message["role"] == "tool":
            continue  # recomputed by executing its call
        steps += message["role"] == "assistant"
        call = first_call(message) if message["role"] == "assistant" else None
        if call is None:
            transcript.add(message)
            continue
        tool_call = ToolCall(call.id, call.name, call.arguments, json.dumps(call.arguments))
        reply = Reply(content=message.get("content"), tool_calls=[tool_call])
        ok, reason = _record_tool_turn(domain, transcript, reply, next(results))
        errors += not ok
    return steps, errors, reason


def _tool_turn(domain: Domain, db, transcript: _Transcript, reply: Reply) -> tuple[bool, str | None]:
    """Execute the first tool call of `reply`; returns (tool succeeded, termination reason or None)."""
    call = reply.tool_calls[0]
    if call.arguments is None:
        result = ToolResult(
            f"Error: the arguments of '{call.name}' are not a JSON object: {call.raw_arguments!r}", False
        )
    else:
        result = domain.execute(db, call.name, call.arguments)
    return _record_tool_turn(domain, transcript, reply, result)


def _record_tool_turn(
    domain: Domain, transcript: _Transcript, reply: Reply, result: ToolResult
) -> tuple[bool, str | None]:
    """Add the turn executing the first tool call of `reply` and its `result`; returns (tool succeeded,
    termination reason or None)."""
    call = reply.tool_calls[0]
    violation = None
    if len(reply.tool_calls) > 1:
        violation = "multiple_tool_calls"
    elif reply.content:
        violation = "tool_call_with_text"
    raw = [{"name": c.name, "arguments": c.raw_arguments} for c in reply.tool_calls] if violation else None
    if call.arguments is None:
        violation, raw = "malformed_tool_call", {"name": call.name, "arguments": call.raw_arguments}
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.content or None,
        "tool_calls": [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments or {}}}
        ],
    }
    if call.arguments is not None and domain.tool_kind(call.name) == "unknown":
        violation = violation or "unknown_tool"
    transcript.add(message, reply, violation=violation, raw=raw)
    transcript.add({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": result.observation})
    transferred = result.ok and domain.tool_kind(call.name) == "transfer"
    return result.ok, ("transfer" if transferred else None)
