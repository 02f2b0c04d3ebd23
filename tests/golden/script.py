"""Hand-built trajectories: a script of user turns, agent messages and tool calls, run for real on a domain.

Tool calls execute on an episode database under the episode clock, so observations are real; `build` scores
the episode as the episode loop does. Each method returns the message index it appended, so a case can name
the step it expects the labeler to flag.
"""

from __future__ import annotations

from typing import Any

from castdata.envs import load_domain
from castdata.envs.clock import episode_clock
from castdata.models.spec import ModelSpec
from castdata.records import MessageMeta, Outcome, Privileged, Trajectory, episode_id

STOP = "No, that's all. Thank you! ###STOP###"


class Script:
    """One hand-built episode of a task."""

    def __init__(self, domain: str, task_id: int, split: str = "test") -> None:
        self.domain = load_domain(domain)
        self.task = self.domain.task(split, task_id)
        self.db = self.domain.new_database()
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": self.domain.policy}]
        self.meta: list[MessageMeta] = [MessageMeta(t=0.0)]
        self.termination = "user_stop"

    def _add(self, message: dict[str, Any], violation: str | None = None, raw: Any = None) -> int:
        self.messages.append(message)
        self.meta.append(MessageMeta(t=float(len(self.messages)), violation=violation, raw=raw))
        return len(self.messages) - 1

    def user(self, text: str) -> int:
        """A user turn."""
        return self._add({"role": "user", "content": text})

    def say(self, text: str, answer: str | None = None) -> int:
        """An agent message, and the user's answer when given."""
        step = self._add({"role": "assistant", "content": text})
        if answer is not None:
            self.user(answer)
        return step

    def call(self, name: str, violation: str | None = None, raw: Any = None, **kwargs: Any) -> int:
        """An executed tool call and its observation (`violation`/`raw` as the episode loop records them)."""
        with episode_clock():
            result = self.domain.execute(self.db, name, kwargs)
        call_id = f"call_{len(self.messages)}"
        step = self._add(
            {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": kwargs}}]},
            violation,
            raw,
        )
        self._add({"role": "tool", "tool_call_id": call_id, "name": name, "content": result.observation})
        if result.ok and self.domain.tool_kind(name) == "transfer":
            self.termination = "transfer"
        return step

    def change_flights(self, reservation_id: str, cabin: str, legs: list[tuple[str, str]], payment_id: str) -> int:
        """An airline flight change (`update_reservation_flights`) to (flight number, date) legs."""
        flights = [{"flight_number": number, "date": date} for number, date in legs]
        return self.call(
            "update_reservation_flights", reservation_id=reservation_id, cabin=cabin, flights=flights, payment_id=payment_id
        )

    def add_bags(self, reservation_id: str, total: int, nonfree: int, payment_id: str) -> int:
        """An airline checked-bag change (`update_reservation_baggages`) to `total` bags, `nonfree` of them paid."""
        return self.call(
            "update_reservation_baggages",
            reservation_id=reservation_id,
            total_baggages=total,
            nonfree_baggages=nonfree,
            payment_id=payment_id,
        )

    def gold(self, confirm: bool = True) -> None:
        """Play the task's gold tool calls in order, asking for (and getting) a yes before each write when `confirm`."""
        for action in self.task.actions:
            if confirm and self.domain.tool_kind(action.name) == "write":
                self.say(f"I will {action.name.replace('_', ' ')} with {action.kwargs}. Do you confirm (yes/no)?", "Yes, please.")
            self.call(action.name, **action.kwargs)

    def build(self, trial: int = 0) -> Trajectory:
        """The trajectory record, scored like an episode."""
        said = [m["content"] for m in self.messages if m["role"] == "assistant" and m.get("content")]
        score = self.domain.score(self.task, self.db, said)
        task = self.task
        return Trajectory(
            id=episode_id(self.domain.name, task.split, task.index, trial),
            domain=self.domain.name,
            split=task.split,
            task_id=task.index,
            trial=trial,
            seed=0,
            agent=ModelSpec(backend="scripted", model="golden"),
            user=ModelSpec(backend="scripted", model="scripted-user"),
            tools=self.domain.tool_schemas,
            messages=self.messages,
            meta=self.meta,
            outcome=Outcome(
                reward=score.reward,
                db_match=score.db_match,
                outputs_found=list(score.outputs_found),
                outputs_missing=list(score.outputs_missing),
                termination_reason=self.termination,
            ),
            privileged=Privileged(user_id=task.user_id, instruction=task.instruction, gold_actions=list(task.actions), required_outputs=list(task.outputs)),
            started_at=0.0,
            ended_at=1.0,
        )
