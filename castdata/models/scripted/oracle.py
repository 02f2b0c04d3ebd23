"""The noisy-oracle agent: the gold-way plan (`plan.py`) turned into turns, with mistakes injected.

A SIMULATION, not a model: it reads the task's gold solution (privileged information no real agent has).
It acts only on what the user has asked for so far (a move for a goal waits for the user turn that asks for
it), and with `options.mistakes` (probability per opportunity, per kind) it injects realistic mistakes,
each recorded in the trajectory's `injected_mistakes` (ground truth for testing the labeler). Same seed,
same output. When a critic sends a mistaken move back (`castdata.models.feedback`), it marks the mistake
`intercepted` and, with probability `options.revise` (default 1), plays the gold way instead; otherwise it
repeats the mistake or, for a write, makes another (a wrong argument to the gold write), and records which in
the mistake's `revision`. A correct move sent back is proposed again. Resumed from a
recorded conversation (`run_episode(prefix=...)`), it plays the steps of its plan the conversation has not
made yet. A user's request its instruction does not make (`user_deviation`) is served the careful way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from castdata.envs import RESPOND
from castdata.envs.perturb import misread, other_write_tool, perturb_arguments, without_item
from castdata.messages import is_agent_text, tool_turns
from castdata.models.base import EpisodeContext, Reply, ToolCall
from castdata.models.feedback import transcript_length
from castdata.models.scripted.goals import deviation, goals, identity
from castdata.models.scripted.plan import ANYTHING_ELSE, Step, amount_on_record, confirmation, end_text, plan
from castdata.records import Action, CriticCall, InjectedMistake, Interception

MISTAKE_KINDS = (
    "wrong_argument",  # a write with one argument changed to another plausible value (outcome-breaking)
    "wrong_tool",  # a write through another write tool (outcome-breaking)
    "no_confirmation",  # a write without asking the user to confirm first
    "before_auth",  # a lookup before the user is authenticated
    "premature_end",  # ending the conversation before a remaining write (outcome-breaking)
    "missing_output",  # never telling the user a required output (outcome-breaking)
    "two_tool_calls",  # two tool calls in one turn (only the first is executed)
    "misread_observation",  # telling the user a wrong value taken from a tool result
    "wrong_refusal",  # refusing a request the policy allows (outcome-breaking)
    "partial_plan",  # leaving one of the items of a write out (outcome-breaking)
    "wrong_order",  # a write that makes a later required write fail (outcome-breaking)
    "guessed_id",  # using an identifier never seen: the lookup that shows it is skipped
    "malformed_call",  # a lookup whose arguments are not JSON (cut short); the error result, then the lookup
    "empty_reply",  # an empty message before one the plan says; the user asks what the agent means
    "needless_transfer",  # a transfer to a human in place of a write, when the task needs none (outcome-breaking)
    "repeated_lookup",  # a lookup made again right after its result, nothing changed in between
)
OUTCOME_BREAKING = frozenset(
    {
        "wrong_argument",
        "wrong_tool",
        "premature_end",
        "missing_output",
        "wrong_refusal",
        "partial_plan",
        "wrong_order",
        "needless_transfer",
    }
)
# A mistake of these kinds is recorded as outcome-breaking only when it is: the oracle checks with a
# privileged replay (e.g. a wrong argument to a gold write that fails anyway changes nothing).


@dataclass
class Move:
    """One planned agent turn: a message (`say`) or tool calls (`calls`, only the first is executed)."""

    say: str | None = None
    calls: tuple[Action, ...] = ()
    goal: int = 0  # the user's goal it serves: played only after a user turn asked for it
    mistakes: tuple[str, ...] = ()
    replaces: Action | None = None  # the gold write a wrong write stands in for
    breaking: bool = False  # for mistakes other than wrong_argument, decided when planned
    details: dict[str, str] = field(default_factory=dict)  # per mistake kind: what it changed
    outputs: tuple[str, ...] | None = None  # a goal's end: the message, with these outputs, is worded when played
    fix: tuple[Move, ...] = ()  # for a move with mistakes: the gold way, played if a critic sends the move back
    covers: int = 1  # how many planned moves, from this one, `fix` replaces


def _never(kind: str) -> bool:
    """A roll that never injects a mistake (for planning the gold way)."""
    return False


class NoisyOracleAgent:
    """Plays the gold-way plan, injecting mistakes with the configured probabilities."""

    def __init__(self, ctx: EpisodeContext, mistakes: dict[str, float], revise: float = 1.0) -> None:
        self.ctx = ctx
        self.rng = ctx.rng("agent")
        self.mistakes = mistakes
        self.revise = revise  # the chance that a mistake sent back by a critic is revised the gold way
        self.injected: list[InjectedMistake] = []
        self.interceptions: list[Interception] = []  # no critic guards it
        self.critic_calls: list[CriticCall] = []
        self.requests = goals(ctx.domain, ctx.task)
        self.deviation = deviation(ctx.domain, ctx.task)
        self.steps = plan(ctx.domain, ctx.task)
        self.moves = self._moves(self.steps, self._roll)
        self.turn = 0
        self.last: int | None = None  # the index of the move played last (None: a message outside the plan)
        self.served_deviation = False

    def _roll(self, kind: str) -> bool:
        return self.rng.random() < self.mistakes.get(kind, 0.0)

    def resume(self, messages: list[dict[str, Any]]) -> None:
        """Continue a recorded conversation: play the plan's steps it has not made (calls not executed, messages not
        said), rolling for mistakes as usual, and skip a first move that repeats its last agent message."""
        executed = [call.action for _, call in tool_turns(messages)]
        said = [m.get("content") for m in messages if is_agent_text(m)]
        remaining = []
        for step in self.steps:
            if step.action is not None and step.action in executed:
                executed.remove(step.action)
            elif step.action is not None or step.text not in said:
                remaining.append(step)
        moves = self._moves(remaining, self._roll)
        if said and moves and moves[0].say is not None and moves[0].say == said[-1]:
            moves.pop(0)
        self.moves, self.turn, self.last = moves, 0, None

    # -- planning -------------------------------------------------------------------------------
    def _moves(self, steps: list[Step], roll) -> list[Move]:
        """The turns of `steps`; `roll(kind)` decides each opportunity for a mistake."""
        steps = list(steps)
        final = len(self.requests) - 1
        moves: list[Move] = []
        guess: Step | None = None  # a lookup skipped by guessed_id: the next move uses what it would have shown
        index = 0
        while index < len(steps):
            step = steps[index]
            following = steps[index + 1] if index + 1 < len(steps) else None
            start = len(moves)
            if step.kind == "say":
                say = Move(say=step.text, goal=step.goal)
                if roll("empty_reply"):
                    moves.append(Move(say="", goal=step.goal, mistakes=("empty_reply",), fix=(say,), covers=2))
                moves.append(say)
            elif step.kind == "read":
                if step.action.name in self.ctx.domain.catalog.auth_tools:
                    moves += self._auth(step, steps, index, roll)
                elif step.reveals and following is not None and following.action is not None and roll("guessed_id"):
                    guess = step
                elif following is not None and following.kind == "read" and roll("two_tool_calls"):
                    moves.append(
                        Move(
                            calls=(step.action, following.action),
                            goal=step.goal,
                            mistakes=("two_tool_calls",),
                            fix=(Move(calls=(step.action,), goal=step.goal),),
                        )
                    )
                    moves.append(Move(calls=(following.action,), goal=step.goal))
                    index += 1
                else:
                    moves += self._lookup(step, roll)
            elif step.kind == "write":
                skipped = self._write(step, steps, index, final, roll, moves)
                index += skipped
            else:
                moves.append(self._end(step, final, roll))
            if guess is not None and len(moves) > start and step is not guess:
                moves[start : start + 1] = _guessed(moves[start], guess)
                guess = None
            index += 1
        for position, move in enumerate(moves[:-1]):  # sent back by a critic, a repeat gives way to the next move
            if "repeated_lookup" in move.mistakes:
                move.fix, move.covers = (moves[position + 1],), 2
        return moves

    def _lookup(self, step: Step, roll) -> list[Move]:
        """A lookup, possibly first with its arguments cut short (malformed_call), possibly made twice in a row
        when its result is no error (repeated_lookup)."""
        read = Move(calls=(step.action,), goal=step.goal)
        moves = [read]
        if roll("malformed_call"):
            detail = {"malformed_call": f"{step.action.name} with arguments that are not JSON"}
            moves.insert(
                0,
                Move(
                    calls=read.calls,
                    goal=step.goal,
                    mistakes=("malformed_call",),
                    details=detail,
                    fix=(read,),
                    covers=2,
                ),
            )
        if step.ok and roll("repeated_lookup"):
            detail = {"repeated_lookup": f"{step.action.name} again"}
            moves.append(Move(calls=read.calls, goal=step.goal, mistakes=("repeated_lookup",), details=detail))
        return moves

    def _auth(self, step: Step, steps: list[Step], index: int, roll) -> list[Move]:
        """Authentication, or (before_auth) a lookup with what the user said first, then authentication."""
        early = set(self.requests[:1]) | {identity(self.ctx.domain, self.ctx.task)}
        auth = Move(calls=(step.action,), goal=step.goal)
        for later in range(index + 1, len(steps)):
            candidate = steps[later]
            if candidate.kind != "read" or candidate.goal != 0:
                break
            values = [str(v) for v in candidate.action.kwargs.values()]
            if (
                values
                and candidate.action.name not in self.ctx.domain.catalog.auth_tools
                and all(any(v in text for text in early) for v in values)
            ):
                if not roll("before_auth"):
                    break
                read = Move(calls=(candidate.action,), goal=0)
                del steps[later]
                return [Move(calls=read.calls, goal=0, mistakes=("before_auth",), fix=(auth, read), covers=2), auth]
        return [auth]

    def _write(self, step: Step, steps: list[Step], index: int, final: int, roll, moves: list[Move]) -> int:
        """Append the moves of a write step; returns how many following steps it consumed."""
        action, goal = step.action, step.goal
        rest = [s for s in steps[index:] if s.goal == goal]
        gold_way = lambda: tuple(self._moves(rest, _never))  # noqa: E731
        abandon = None
        if goal == final and roll("premature_end"):
            abandon = Move(say=f"I have taken care of your request. {ANYTHING_ELSE}", mistakes=("premature_end",))
        elif roll("wrong_refusal"):
            what = action.name.replace("_", " ")
            say = f"I'm sorry, but I can't {what} for you: our policy does not allow it. {ANYTHING_ELSE}"
            abandon = Move(say=say, mistakes=("wrong_refusal",), details={"wrong_refusal": f"refused {action.name}"})
        elif (handoff := self._handoff(action)) is not None and roll("needless_transfer"):
            details = {"needless_transfer": f"{handoff.name} instead of {action.name}"}
            abandon = Move(calls=(handoff,), mistakes=("needless_transfer",), details=details)
        if abandon is not None:  # the goal ends here, its remaining writes never made; a transfer ends the episode
            ends = goal == final or bool(abandon.calls)
            skipped = steps[index:] if abandon.calls else rest
            breaking = self._breaks(skipped=[s.action for s in skipped if s.kind == "write"]) or (
                ends and bool(self.ctx.task.outputs)
            )
            moves.append(Move(**{**vars(abandon), "goal": goal, "breaking": breaking, "fix": gold_way()}))
            return len(rest) - 1
        later = next((s for s in steps[index + 1 :] if s.kind == "write"), None)
        if later is not None and later.goal == goal and self._swap_breaks(action, later.action) and roll("wrong_order"):
            between = steps[index + 1 : steps.index(later)]
            moves += self._moves(between, _never)
            first = Move(
                calls=(later.action,),
                goal=goal,
                mistakes=("wrong_order",),
                breaking=True,
                details={"wrong_order": f"{later.action.name} before {action.name}"},
                fix=(
                    Move(say=confirmation(action), goal=goal),
                    Move(calls=(action,), goal=goal),
                    Move(say=confirmation(later.action), goal=goal),
                    Move(calls=(later.action,), goal=goal),
                ),
                covers=3,
            )
            moves += [
                Move(say=confirmation(later.action), goal=goal),
                first,
                Move(say=confirmation(action), goal=goal),
                Move(calls=(action,), goal=goal),
            ]
            return len(between) + 1
        lists = [v for v in action.kwargs.values() if isinstance(v, list)]
        if lists and len(lists[0]) > 1 and roll("partial_plan"):
            partial, detail = without_item(action, self.rng.randrange(len(lists[0])))
            breaking = self._breaks(replace={id(action): partial})
            fix = (Move(say=confirmation(action), goal=goal), Move(calls=(action,), goal=goal))
            moves += [
                Move(say=confirmation(partial), goal=goal),
                Move(
                    calls=(partial,),
                    goal=goal,
                    mistakes=("partial_plan",),
                    breaking=breaking,
                    details={"partial_plan": detail},
                    fix=fix,
                ),
            ]
            return 0
        write = self._call(action, goal, roll)
        if roll("no_confirmation"):
            fix = (Move(say=confirmation(action), goal=goal), Move(calls=(action,), goal=goal))
            moves.append(Move(**{**vars(write), "mistakes": ("no_confirmation", *write.mistakes), "fix": fix}))
        else:
            moves += [Move(say=confirmation(action), goal=goal), write]
        return 0

    def _handoff(self, action: Action) -> Action | None:
        """A transfer to a human agent about the request `action` serves; None where the domain has no transfer
        tool, or where the task's gold solution transfers (the hand-off is then no mistake)."""
        domain = self.ctx.domain
        name = domain.catalog.transfer_tool
        if name is None or any(domain.tool_kind(a.name) == "transfer" for a in self.ctx.task.actions):
            return None
        required = domain.tools[name].get_info()["function"]["parameters"].get("required", [])
        why = f"The user asks to {action.name.replace('_', ' ')}; handing over to a human agent."
        return Action(name=name, kwargs={param: why for param in required})

    def _call(self, action: Action, goal: int, roll) -> Move:
        fix = (Move(calls=(action,), goal=goal),)
        if roll("wrong_tool"):
            other = other_write_tool(self.ctx.domain, action)
            if other is not None:
                return Move(
                    calls=(other,),
                    goal=goal,
                    mistakes=("wrong_tool",),
                    replaces=action,
                    fix=fix,
                    breaking=self._breaks(replace={id(action): other}),
                    details={"wrong_tool": f"called {other.name} instead of {action.name}"},
                )
        if roll("wrong_argument"):
            return Move(calls=(action,), goal=goal, mistakes=("wrong_argument",), replaces=action, fix=fix)
        return Move(calls=(action,), goal=goal)

    def _end(self, step: Step, final: int, roll) -> Move:
        """A goal's end: what its last write's result shows (worded when played, from the real result), the
        required outputs after the last goal, and an offer of more help."""
        outputs = self.ctx.task.outputs if step.goal == final else ()
        right = Move(say=step.text, goal=step.goal, outputs=outputs)
        if outputs and roll("missing_output"):
            return Move(
                say=step.text, goal=step.goal, outputs=(), mistakes=("missing_output",), breaking=True, fix=(right,)
            )
        if step.value is not None and roll("misread_observation"):
            return Move(say=step.text, goal=step.goal, outputs=outputs, mistakes=("misread_observation",), fix=(right,))
        return right

    def _breaks(self, skipped: list[Action] = (), replace: dict[int, Action] | None = None) -> bool:
        """Privileged check: would the gold solution, without `skipped` and with `replace` (by id of the gold
        action), leave another database than the gold solution?"""
        replace = replace or {}
        gold = [
            replace.get(id(a), a)
            for a in self.ctx.task.actions
            if a.name != RESPOND and not any(a is s for s in skipped)
        ]
        return not self.ctx.domain.reaches_gold(gold, self.ctx.task)

    def _swap_breaks(self, first: Action, second: Action) -> bool:
        """Privileged check: does making `second` before `first` leave another database than the gold solution?"""
        gold = [a for a in self.ctx.task.actions if a.name != RESPOND]
        swapped = [second if a is first else first if a is second else a for a in gold]
        return not self.ctx.domain.reaches_gold(swapped, self.ctx.task)

    def _unsaid(self, messages: list[dict[str, Any]], say: str) -> bool:
        """Whether a required output stays unsaid with this message (the reward's check: case and commas ignored)."""
        said = [str(m.get("content") or "") for m in messages if is_agent_text(m)]
        texts = [text.lower().replace(",", "") for text in [*said, say]]
        return any(not any(output.lower() in text for text in texts) for output in self.ctx.task.outputs)

    # -- playing --------------------------------------------------------------------------------
    def _revise(self, step: int) -> None:
        """A critic sent the last move back: replan it the gold way (its fix) with probability `revise`, else repeat
        it or make another mistake (`_another`); a move without a fix is proposed again."""
        if self.last is None:
            return
        self.turn = self.last
        move = self.moves[self.turn]
        if not move.fix:
            return
        revision = "gold"
        if self.revise < 1.0 and self.rng.random() >= self.revise:
            other = self._another(move) if self.rng.random() < 0.5 else None
            revision = "repeated" if other is None else "another"
            self.moves[self.turn] = other or move
        else:
            self.moves[self.turn : self.turn + move.covers] = move.fix
        for mistake in self.injected:
            if mistake.step == step and not mistake.intercepted:
                mistake.intercepted, mistake.revision = True, revision

    def _another(self, move: Move) -> Move | None:
        """Another mistake in place of `move`: a wrong argument to the gold write its fix makes (None: no write)."""
        writes = (m.calls[0] for m in move.fix if m.calls and self.ctx.domain.tool_kind(m.calls[0].name) == "write")
        write = next(writes, None)
        if write is None or (move.calls[:1] == (write,) and "wrong_argument" in move.mistakes):
            return None
        return Move(
            calls=(write,),
            goal=move.goal,
            mistakes=("wrong_argument",),
            replaces=write,
            fix=move.fix,
            covers=move.covers,
        )

    def _asked(self, messages: list[dict[str, Any]], goal: int) -> bool:
        """Whether a user turn has asked for `goal` (the deviation request being the goal after the last)."""
        text = self.requests[goal] if goal < len(self.requests) else (self.deviation.text if self.deviation else "")
        return any(text and text in (m.get("content") or "") for m in messages if m["role"] == "user")

    def _serve_deviation(self) -> None:
        """The user asked for something its instruction does not say: plan it, the careful way."""
        self.served_deviation = True
        extra = [s for s in plan(self.ctx.domain, self.ctx.task, self.deviation) if s.goal == len(self.requests)]
        self.moves += self._moves(extra, _never)

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        """The next planned turn (after a critic's feedback, the revision of the last one); after the plan, a closing
        message; a turn for a goal the user has not asked for yet waits (the agent asks what else it can do)."""
        step = transcript_length(messages)
        if step < len(messages):
            self._revise(step)
        if (
            self.turn >= len(self.moves)
            and self.deviation
            and not self.served_deviation
            and self._asked(messages, len(self.requests))
        ):
            self._serve_deviation()
        if self.turn >= len(self.moves) or not self._asked(messages, self.moves[self.turn].goal):
            self.last = None
            closing = "Thank you for contacting us. " if self.turn >= len(self.moves) else ""
            return Reply(content=f"{closing}{ANYTHING_ELSE}")
        move = self.moves[self.turn]
        self.last = self.turn
        self.turn += 1
        calls, say = list(move.calls), move.say
        if move.outputs is not None:
            value = _amount_on_record(messages, self.ctx.domain)
            if value is not None and "misread_observation" in move.mistakes:
                move.details["misread_observation"] = f"{value[0]}: {value[1]} -> {misread(value[1])}"
                value = (value[0], misread(value[1]))
            say = end_text(value, move.outputs)
        for kind in move.mistakes:
            detail, breaking = move.details.get(kind, ""), move.breaking
            if (kind == "misread_observation" and not detail) or (
                kind == "missing_output" and not self._unsaid(messages, say)
            ):
                continue  # no value to misread; the outputs were said anyway (e.g. a summary's amount is one)
            if kind == "wrong_argument":
                changed = perturb_arguments(calls[0], _visible_text(messages), self.ctx.domain, self.rng)
                if changed is None:
                    continue
                calls[0], detail = changed
                breaking = self._breaks(replace={id(move.replaces): calls[0]})
            self.injected.append(
                InjectedMistake(
                    kind=kind, step=step, outcome_breaking=kind in OUTCOME_BREAKING and breaking, detail=detail
                )
            )
        if say is not None:
            return Reply(content=say)
        cut = "malformed_call" in move.mistakes  # the arguments' closing brace left off: no JSON object
        return Reply(
            tool_calls=[
                ToolCall(
                    id=f"call_{step}_{i}",
                    name=a.name,
                    arguments=None if cut else dict(a.kwargs),
                    raw_arguments=json.dumps(a.kwargs)[:-1] if cut else json.dumps(a.kwargs),
                )
                for i, a in enumerate(calls)
            ]
        )


def _guessed(move: Move, lookup: Step) -> list[Move]:
    """`move` made without the `lookup` before it (guessed_id), if it uses what the lookup shows; else both, the
    gold way."""
    looked = Move(calls=(lookup.action,), goal=lookup.goal)
    used = json.dumps([move.say, [a.kwargs for a in move.calls]])
    if not any(token in used for token in lookup.reveals):
        return [looked, move]
    detail = f"{', '.join(lookup.reveals)} without {lookup.action.name}"
    gold = Move(**{**vars(move), "mistakes": (), "fix": ()})
    return [
        Move(
            **{
                **vars(move),
                "mistakes": ("guessed_id", *move.mistakes),
                "details": {**move.details, "guessed_id": detail},
                "fix": (looked, gold),
            }
        )
    ]


def _amount_on_record(messages: list[dict[str, Any]], domain) -> tuple[str, str] | None:
    """The amount the latest successful write's result shows, since the agent last wrote to the user."""
    for message in reversed(messages):
        if is_agent_text(message):
            return None
        if (
            message["role"] == "tool"
            and domain.tool_kind(message["name"]) == "write"
            and not message["content"].startswith("Error")
        ):
            return amount_on_record(message["content"])
    return None


def _visible_text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages[1:])
