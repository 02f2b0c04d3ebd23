"""The offline default models (`backend: scripted`): a deterministic user and a noisy-oracle agent.

A SIMULATION for demos and tests, not a model. The noisy oracle reads the task's gold solution (privileged
information no real agent has) and plays it the way a careful agent would: ask for identity, authenticate,
look up, state each change and ask for explicit confirmation, write, then tell the required outputs. With
`options.mistakes` (probability per opportunity, per kind) it injects realistic mistakes and records each in
the trajectory's `injected_mistakes`, which are ground truth for testing the labeler. Same seed, same output.
When a critic sends a mistaken move back (`castdata.critic.feedback`), it plays the gold way instead and marks
the mistake `intercepted`; a correct move sent back is proposed again. Resumed from a recorded conversation
(`run_episode(prefix=...)`), it plans the gold calls the conversation has not executed yet.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from castdata.critic.feedback import transcript_length
from castdata.envs import RESPOND
from castdata.envs.database import same_state
from castdata.models.base import EpisodeContext, Reply, ToolCall
from castdata.models.dual_control import Phone, due, phone_requests
from castdata.models.spec import ModelSpec
from castdata.records import Action, InjectedMistake

MISTAKE_KINDS = (
    "wrong_argument",  # a write with one argument changed to another plausible value (outcome-breaking)
    "wrong_tool",  # a write through another write tool (outcome-breaking)
    "no_confirmation",  # a write without asking the user to confirm first
    "before_auth",  # a lookup before the user is authenticated
    "premature_end",  # ending the conversation before a remaining write (outcome-breaking)
    "missing_output",  # never telling the user a required output (outcome-breaking)
    "two_tool_calls",  # two tool calls in one turn (only the first is executed)
)
OUTCOME_BREAKING = frozenset({"wrong_argument", "wrong_tool", "premature_end", "missing_output"})
# A mistake of these kinds is recorded as outcome-breaking only when it is: the oracle checks with a
# privileged replay (e.g. a wrong argument to a gold write that fails anyway changes nothing).

ANYTHING_ELSE = "Is there anything else I can help you with?"


@dataclass
class Move:
    """One planned agent turn: a message (`say`) or tool calls (`calls`, only the first is executed)."""

    say: str | None = None
    calls: tuple[Action, ...] = ()
    mistakes: tuple[str, ...] = ()
    replaces: Action | None = None  # the gold write a wrong write stands in for
    breaking: bool = False  # for premature_end / missing_output, decided when planned
    fix: tuple[Move, ...] = ()  # for a move with mistakes: the gold way, played if a critic sends the move back
    covers: int = 1  # how many planned moves, from this one, `fix` replaces


class ScriptedBackend:
    """`backend: scripted`: sessions for the noisy-oracle agent and the scripted user."""

    def __init__(self, spec: ModelSpec) -> None:
        unknown = set(spec.options) - {"mistakes"}
        if unknown:
            raise ValueError(f"options: unknown scripted option(s) {sorted(unknown)}; allowed: mistakes")
        self.mistakes: dict[str, float] = dict(spec.options.get("mistakes", {}))
        bad = set(self.mistakes) - set(MISTAKE_KINDS)
        if bad:
            raise ValueError(f"options.mistakes: unknown kind(s) {sorted(bad)}; allowed: {', '.join(MISTAKE_KINDS)}")

    def agent_session(self, ctx: EpisodeContext) -> "NoisyOracleAgent":
        return NoisyOracleAgent(ctx, self.mistakes)

    def user_session(self, ctx: EpisodeContext) -> "ScriptedUser":
        return ScriptedUser(ctx)

    async def complete(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None) -> Reply:
        raise NotImplementedError("the scripted backend only plays agents and users; use a model backend here")

    async def aclose(self) -> None:
        return None


class NoisyOracleAgent:
    """Plays the gold solution like a careful agent, injecting mistakes with the configured probabilities."""

    def __init__(self, ctx: EpisodeContext, mistakes: dict[str, float]) -> None:
        self.ctx = ctx
        self.rng = ctx.rng("agent")
        self.mistakes = mistakes
        self.injected: list[InjectedMistake] = []
        self.moves = self._plan()
        self.turn = 0
        self.last: int | None = None  # the index of the move played last (None: the closing message)

    def _roll(self, kind: str) -> bool:
        return self.rng.random() < self.mistakes.get(kind, 0.0)

    def _plan(self) -> list[Move]:
        domain, task = self.ctx.domain, self.ctx.task
        gold = [a for a in task.actions if a.name != RESPOND]
        auth = domain.auth_action(task)
        rest = [a for a in gold if a is not auth]
        moves = [self._greeting()]
        if auth is not None:
            first_read = next((i for i, a in enumerate(rest) if domain.tool_kind(a.name) == "read" and a.name not in domain.catalog.auth_tools), None)
            if first_read is not None and self._roll("before_auth"):
                read = rest.pop(first_read)
                fix = (Move(calls=(auth,)), Move(calls=(read,)))
                moves.append(Move(calls=(read,), mistakes=("before_auth",), fix=fix, covers=2))
            moves.append(Move(calls=(auth,)))
        return moves + self._plan_rest(rest, self._roll)

    def _greeting(self) -> Move:
        return Move(say=f"I'd be happy to help. To get started, could you please provide {self.ctx.domain.catalog.auth_hint}?")

    def resume(self, messages: list[dict[str, Any]]) -> None:
        """Continue a recorded conversation: plan the gold calls it has not executed (greeting and authenticating
        first when it has not), rolling for mistakes as usual after authentication, and skip a first move that
        repeats the conversation's last agent message (a confirmation question already asked)."""
        auth = self.ctx.domain.auth_action(self.ctx.task)
        gold = [a for a in self.ctx.task.actions if a.name != RESPOND and a is not auth]
        executed = [Action(name=c["function"]["name"], kwargs=c["function"]["arguments"]) for m in messages for c in (m.get("tool_calls") or [])[:1]]
        remaining = []
        for action in ([auth] if auth is not None else []) + gold:
            if action in executed:
                executed.remove(action)
            else:
                remaining.append(action)
        said = [m for m in messages if m["role"] == "assistant"]
        moves = [] if said else [self._greeting()]
        if remaining and remaining[0] is auth:
            moves.append(Move(calls=(remaining.pop(0),)))
        moves += self._plan_rest(remaining, self._roll)
        if said and moves and moves[0].say is not None and moves[0].say == said[-1].get("content"):
            moves.pop(0)
        self.moves, self.turn, self.last = moves, 0, None

    def _plan_rest(self, rest: list[Action], roll) -> list[Move]:
        """The moves after authentication; `roll(kind)` decides each opportunity for a mistake."""
        domain, task = self.ctx.domain, self.ctx.task
        gold = [a for a in task.actions if a.name != RESPOND]
        moves: list[Move] = []
        requests = phone_requests(task)  # dual control: the user's own gold calls, asked for in gold order
        index = 0
        while index < len(rest):
            action = rest[index]
            position = next((i for i, a in enumerate(task.actions) if a is action), len(task.actions))
            moves += [Move(say=text) for text in due(requests, position)]
            kind = domain.tool_kind(action.name)
            following = rest[index + 1] if index + 1 < len(rest) else None
            if kind == "write":
                if roll("premature_end"):
                    left = rest[index:]
                    breaking = bool(task.outputs) or self._breaks([a for a in gold if a not in left])
                    fix = tuple(self._plan_rest(left, _never))
                    moves.append(Move(say=f"I have taken care of your request. {ANYTHING_ELSE}", mistakes=("premature_end",), breaking=breaking, fix=fix))
                    return moves
                if roll("no_confirmation"):
                    write = self._write(action, roll)
                    fix = (Move(say=self._confirmation(action)), Move(calls=(action,)))
                    moves.append(Move(calls=write.calls, mistakes=("no_confirmation", *write.mistakes), replaces=write.replaces, fix=fix))
                else:
                    moves.append(Move(say=self._confirmation(action)))
                    moves.append(self._write(action, roll))
            elif kind == "read" and following is not None and domain.tool_kind(following.name) == "read" and roll("two_tool_calls"):
                moves.append(Move(calls=(action, following), mistakes=("two_tool_calls",), fix=(Move(calls=(action,)),)))
                moves.append(Move(calls=(following,)))
                index += 1
            else:
                moves.append(Move(calls=(action,)))
            index += 1
        moves += [Move(say=text) for text in due(requests, None)]
        outputs = Move(say=f"Here is the information you asked for: {'; '.join(task.outputs)}. {ANYTHING_ELSE}")
        if task.outputs and roll("missing_output"):
            moves.append(Move(say=f"Your request is complete. {ANYTHING_ELSE}", mistakes=("missing_output",), breaking=True, fix=(outputs,)))
        elif task.outputs:
            moves.append(outputs)
        else:
            moves.append(Move(say=f"Your request is complete. {ANYTHING_ELSE}"))
        return moves

    def _breaks(self, actions: list[Action]) -> bool:
        """Privileged check: would these tool calls leave another database than the gold solution?"""
        domain, task = self.ctx.domain, self.ctx.task
        return not same_state(domain.base, domain.replay(actions).changes(), domain.gold_changes(task.split, task.index))

    def _confirmation(self, action: Action) -> str:
        what = action.name.replace("_", " ")
        return f"I can {what} with these details: {json.dumps(action.kwargs)}. Do you confirm that I should proceed (yes/no)?"

    def _write(self, action: Action, roll) -> Move:
        fix = (Move(calls=(action,)),)
        if roll("wrong_tool"):
            other = _other_write_tool(self.ctx, action)
            if other is not None:
                return Move(calls=(other,), mistakes=("wrong_tool",), replaces=action, fix=fix)
        if roll("wrong_argument"):
            return Move(calls=(action,), mistakes=("wrong_argument",), replaces=action, fix=fix)
        return Move(calls=(action,))

    def _revise(self, step: int) -> None:
        """A critic sent the last move back: replan it the gold way (its fix), or propose it again when it had none."""
        if self.last is None:
            return
        self.turn = self.last
        move = self.moves[self.turn]
        if move.fix:
            self.moves[self.turn:self.turn + move.covers] = move.fix
            for mistake in self.injected:
                mistake.intercepted = mistake.intercepted or mistake.step == step

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        """The next planned turn (after a critic's feedback, the revision of the last one); after the plan, a closing message."""
        step = transcript_length(messages)
        if step < len(messages):
            self._revise(step)
        if self.turn >= len(self.moves):
            self.last = None
            return Reply(content=f"Thank you for contacting us. {ANYTHING_ELSE}")
        move = self.moves[self.turn]
        self.last = self.turn
        self.turn += 1
        calls = list(move.calls)
        for kind in move.mistakes:
            detail = ""
            if kind == "wrong_argument":
                changed = perturb_arguments(calls[0], _visible_text(messages), self.ctx.domain, self.rng)
                if changed is None:
                    continue
                calls[0], detail = changed
            elif kind == "wrong_tool":
                detail = f"called {calls[0].name} instead of {move.replaces.name}"
            breaking = move.breaking
            if kind in ("wrong_argument", "wrong_tool"):
                gold = [a for a in self.ctx.task.actions if a.name != RESPOND]
                breaking = self._breaks([calls[0] if a is move.replaces else a for a in gold])
            self.injected.append(InjectedMistake(kind=kind, step=step, outcome_breaking=kind in OUTCOME_BREAKING and breaking, detail=detail))
        if move.say is not None:
            return Reply(content=move.say)
        return Reply(
            tool_calls=[
                ToolCall(id=f"call_{step}_{i}", name=a.name, arguments=dict(a.kwargs), raw_arguments=json.dumps(a.kwargs))
                for i, a in enumerate(calls)
            ]
        )


class ScriptedUser:
    """A deterministic user: gives identifying details when asked, confirms, and stops when offered more help."""

    PATIENCE = 3  # consecutive turns it does not understand before giving up

    def __init__(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        self.confused = 0
        self.phone = Phone(ctx.task)  # dual control: runs the user's gold calls when the agent asks for them

    def _identity(self) -> str:
        task = self.ctx.task
        auth = self.ctx.domain.auth_action(task)
        if auth is None:
            return f"Sure, my user id is {task.user_id}."
        details = ", ".join(f"my {key.replace('_', ' ')} is {value}" for key, value in auth.kwargs.items())
        return f"Sure: {details}."

    async def reply(self, agent_message: str | None) -> Reply:
        """The user's next message."""
        if agent_message is None:
            return Reply(content="Hi! I need some help with a request about my account.")
        text = agent_message.lower()
        if "anything else" in text:
            return Reply(content="No, that's all. Thank you! ###STOP###")
        self.confused = 0
        calls = self.phone.calls_for(text)
        if calls:
            return Reply(tool_calls=calls)
        if "confirm" in text or "yes/no" in text:
            return Reply(content="Yes, please proceed.")
        if any(word in text for word in ("email", "zip", "user id", "date of birth", "phone", "your name")):
            return Reply(content=self._identity())
        self.confused += 1
        if self.confused >= self.PATIENCE:
            return Reply(content="I don't think we're getting anywhere. ###STOP###")
        return Reply(content="Sorry, I'm not sure what you mean. Can you help me with my request?")

    async def observe(self, results: list[tuple[ToolCall, str]]) -> Reply:
        """The user's message after running its own tools (dual control)."""
        return await self.phone.observe(results)


def _never(kind: str) -> bool:
    """A roll that never injects a mistake (for planning the gold way)."""
    return False


def _visible_text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages[1:])


def _other_write_tool(ctx: EpisodeContext, action: Action) -> Action | None:
    domain = ctx.domain
    for name in sorted(domain.catalog.write_tools - {action.name}):
        params = domain.tools[name].get_info()["function"]["parameters"]
        required = set(params.get("required", []))
        if required and required <= set(action.kwargs):
            return Action(name=name, kwargs={k: v for k, v in action.kwargs.items() if k in params["properties"]})
    return None


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


def perturb_arguments(action: Action, visible: str, domain, rng, keys: list[str] | None = None) -> tuple[Action, str] | None:
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
                return Action(name=action.name, kwargs={**action.kwargs, key: new}), f"{key}[{i}]: {value[i]!r} -> {new_item!r}"
            continue
        new_value = _alternative(value, visible, props.get(key, {}).get("enum"), rng)
        if new_value is not None and new_value != value:
            return Action(name=action.name, kwargs={**action.kwargs, key: new_value}), f"{key}: {value!r} -> {new_value!r}"
    return None
