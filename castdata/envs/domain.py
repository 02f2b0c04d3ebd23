"""One adapter over a tau-trait domain: tools, policy, tasks, episode databases and the reward.

tau2-bench's domains (`tau2-*`) have their own adapter, `castdata.envs.tau2_domain.Tau2Domain`, a subclass;
`load_domain` picks it by the name's `tau2-` prefix.

Everything expensive happens once per process: the JSON tables are read once (`load_domain` is cached),
each task's gold end state is computed once (`Domain.gold_changes` is cached), and a read call's result on the
shared base is reused while the records it read are unchanged (`castdata.envs.reads`).
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from castdata.envs.catalog import CATALOG, SPLITS, DomainCatalog
from castdata.envs.clock import episode_clock, fix_clock
from castdata.envs.database import BaseDatabase, EpisodeDatabase, changed_records, record_value, same_state
from castdata.envs.reads import ReadMemo
from castdata.envs.tau_import import import_domain_module
from castdata.errors import UnknownName
from castdata.records import RESPOND, Action, NLAssertionCheck


@dataclass(frozen=True)
class Task:
    """One task: the user's hidden goal and one gold solution."""

    domain: str
    split: str
    index: int
    user_id: str
    instruction: str
    actions: tuple[Action, ...]  # the agent's gold tool calls
    outputs: tuple[str, ...]
    user_actions: tuple[tuple[int, Action], ...] = ()  # dual control: (agent gold calls before it, user's call)


@dataclass(frozen=True)
class ToolResult:
    """What a tool call returned; `ok` is False for error observations."""

    observation: str
    ok: bool


@dataclass(frozen=True)
class Score:
    """The tau-bench reward of one episode and its parts."""

    reward: float
    db_match: bool
    outputs_found: tuple[str, ...]
    outputs_missing: tuple[str, ...]
    excluded: str | None = None  # why the reward says nothing (e.g. not judged): no pass^k, no training


Executor = Callable[[EpisodeDatabase, str, Any, str], ToolResult]  # (db, tool name, arguments, requestor)


@dataclass(frozen=True)
class Executed:
    """One replayed tool call: who made it, the call, its result, and (a tracked replay's) for a write the records
    it changed."""

    requestor: str
    action: Action
    result: ToolResult
    changed: dict[tuple[str, str], str | None]  # for a write: each record it changed, to its new fingerprint
    values: dict[tuple[str, str], Any]  # for a write: each changed record's value after it (None: deleted)


@dataclass
class Replay:
    """Tool calls executed in order on one episode database (`Domain.replay`), with what each returned and, when
    `track` is set, changed: a write's changes are the records whose fingerprint differs from what the previous
    write left (a fingerprint pass per write, so only replays that ask for them pay for them)."""

    domain: Domain
    db: EpisodeDatabase
    execute: Executor
    track: bool = False
    calls: list[Executed] = field(default_factory=list)
    _state: dict = field(default_factory=dict)  # `db.changes()` after the last write

    def __post_init__(self) -> None:
        if self.track:
            self._state = self.db.changes()  # the task's initial state: a write's changes are its own

    def run(self, action: Action, requestor: str = "assistant") -> Executed:
        """Execute one more call under the episode clock."""
        with episode_clock():
            result = self.execute(self.db, action.name, action.kwargs, requestor)
        changed, values = {}, {}
        if self.track and self.domain.call_kind(action.name, requestor) == "write":
            after = self.db.changes()
            changed, self._state = changed_records(self._state, after), after
            values = {record: record_value(self.db, record) for record in changed}
        executed = Executed(requestor, action, result, changed, values)
        self.calls.append(executed)
        return executed


class Domain:
    """A tau-trait domain, loaded once per process by `load_domain`."""

    zero_reward_terminations = frozenset({"infrastructure_error"})  # episodes that end so score 0
    tasks_share_initial_state = True  # tau-trait: every task starts from the domain's data
    user_tool_schemas: tuple[dict[str, Any], ...] = ()  # dual control: the user's own tools (none in tau-trait)

    def __init__(self, name: str) -> None:
        self.name = name
        self.catalog: DomainCatalog = CATALOG[name]
        tools_module = import_domain_module(name, "tools")
        self.tools: dict[str, Any] = {tool.get_info()["function"]["name"]: tool for tool in tools_module.ALL_TOOLS}
        for tool in self.tools.values():
            fix_clock(inspect.getmodule(tool))
        self.tool_schemas: list[dict[str, Any]] = [tool.get_info() for tool in tools_module.ALL_TOOLS]
        self.policy: str = import_domain_module(name, "wiki").WIKI
        self.rules: list[str] = list(import_domain_module(name, "rules").RULES)
        self.base = BaseDatabase(import_domain_module(name, "data").load_data())
        self.reads = ReadMemo(self.base)  # read calls' results on the base, reused while what they read is unchanged
        self._tasks: dict[str, tuple[Task, ...]] = {}

    # -- tools ------------------------------------------------------------------------------------
    def tool_kind(self, name: str) -> str:
        """`write`, `transfer`, `read`, or `unknown` for a name that is no tool of this domain."""
        if name in self.catalog.write_tools:
            return "write"
        if name == self.catalog.transfer_tool:
            return "transfer"
        return "read" if name in self.tools else "unknown"

    def new_database(self, task: Task | None = None) -> EpisodeDatabase:
        """A private copy-on-write database for one episode (of `task`: tau-trait tasks all start from the
        same data)."""
        return self.base.episode()

    def execute(
        self, db: EpisodeDatabase, name: str, kwargs: dict[str, Any], requestor: str = "assistant"
    ) -> ToolResult:
        """Run one tool call by `requestor` (`assistant`; `user` only in dual-control domains). Unknown tools and
        bad arguments become error observations, never exceptions."""
        if requestor != "assistant":
            return ToolResult(f"Error: the user has no tools in domain '{self.name}'", False)
        tool = self.tools.get(name)
        if tool is None:
            return ToolResult(f"Error: unknown tool '{name}'. Available tools: {', '.join(self.tools)}", False)
        if not isinstance(kwargs, dict):
            return ToolResult(f"Error: arguments of '{name}' must be a JSON object", False)
        try:
            _signature(tool.invoke).bind(data=db, **kwargs)
        except TypeError as err:
            return ToolResult(f"Error: bad arguments for '{name}': {err}", False)
        if self.tool_kind(name) == "read" and getattr(db, "base", None) is self.base:
            return self.reads.run(db, name, kwargs, functools.partial(_invoke, tool))
        return _invoke(tool, db, kwargs)

    # -- tasks ------------------------------------------------------------------------------------
    def splits(self) -> tuple[str, ...]:
        """The splits this domain ships tasks for."""
        return tuple(split for split in SPLITS if self._task_module(split) is not None)

    def tasks(self, split: str) -> tuple[Task, ...]:
        """All tasks of a split, in tau-trait's order (the task id is the index)."""
        if split not in self._tasks:
            module = self._task_module(split)
            if module is None:
                raise UnknownName(
                    f"split: unknown split '{split}' for domain '{self.name}'; allowed: {', '.join(self.splits())}"
                )
            raw = next(
                value for key, value in vars(module).items() if key.startswith("TASKS") and isinstance(value, list)
            )
            self._tasks[split] = tuple(
                Task(
                    domain=self.name,
                    split=split,
                    index=index,
                    user_id=task.user_id,
                    instruction=task.instruction,
                    actions=tuple(Action(name=a.name, kwargs=a.kwargs) for a in task.actions),
                    outputs=tuple(task.outputs),
                )
                for index, task in enumerate(raw)
            )
        return self._tasks[split]

    def task(self, split: str, index: int) -> Task:
        """One task by split and id."""
        tasks = self.tasks(split)
        if not 0 <= index < len(tasks):
            raise UnknownName(
                f"tasks: task id {index} out of range for {self.name}/{split}; allowed: 0..{len(tasks) - 1}"
            )
        return tasks[index]

    @functools.cache
    def _task_module(self, split: str) -> ModuleType | None:
        try:
            module = import_domain_module(self.name, f"tasks_{split}")
        except ModuleNotFoundError:
            return None
        has_tasks = any(key.startswith("TASKS") and isinstance(v, list) for key, v in vars(module).items())
        return module if has_tasks else None

    def auth_action(self, task: Task) -> Action | None:
        """How the task's user authenticates: the gold solution's auth call, else (many gold solutions, e.g.
        every retail train task, skip it) a lookup by the email on the user's record; None if neither exists."""
        gold = next((a for a in task.actions if a.name in self.catalog.auth_tools), None)
        if gold is not None or self.catalog.email_auth_tool is None:
            return gold
        table = self.base.tables[self.catalog.user_table]
        email = _find_key(self._plain(table.load(task.user_id)), "email") if task.user_id in table.blobs else None
        return Action(name=self.catalog.email_auth_tool, kwargs={"email": email}) if email else None

    def auth_calls(self, task: Task) -> list[Action]:
        """Every auth call that finds the task's user, its arguments read off the user's record (a name and zip
        code, an email): what a user who gives those details can be looked up by."""
        table = self.base.tables.get(self.catalog.user_table)
        if table is None or task.user_id not in table.blobs:
            return []
        record, found = self._plain(table.load(task.user_id)), []
        for schema in self.tool_schemas:
            function = schema["function"]
            if function["name"] not in self.catalog.auth_tools:
                continue
            names = function.get("parameters", {}).get("required") or []
            values = {name: _find_key(record, name) for name in names}
            if names and all(isinstance(value, str) for value in values.values()):
                found.append(Action(name=function["name"], kwargs=values))
        return found

    def user_tool_kind(self, name: str) -> str:
        """The kind of a user tool: tau-trait's users have none (`unknown`)."""
        return "unknown"

    def call_kind(self, name: str, requestor: str = "assistant") -> str:
        """The kind of a tool call by `requestor`: `tool_kind` for the agent's, `user_tool_kind` for the user's."""
        return self.tool_kind(name) if requestor == "assistant" else self.user_tool_kind(name)

    @staticmethod
    def _plain(record: Any) -> Any:
        """A stored record as plain JSON-like data."""
        return record

    # -- replay and reward ------------------------------------------------------------------------
    def replay(
        self,
        calls: Iterable[Action | tuple[str, Action]],
        task: Task | None = None,
        execute: Executor | None = None,
        track: bool = False,
    ) -> Replay:
        """Execute tool calls in order on a fresh database (of `task`) under the episode clock: each an agent's
        action or a (requestor, action) pair, run by `execute` (`Domain.execute` unless given). Returns the
        database and what each call returned (and with `track`, what each write changed)."""
        replay = Replay(self, self.new_database(task), execute or self.execute, track)
        for call in calls:
            requestor, action = call if isinstance(call, tuple) else ("assistant", call)
            replay.run(action, requestor)
        return replay

    def tool_actions(self, actions: Iterable[Action]) -> list[Action]:
        """The actions a solution's replay executes, as tau-bench's reward replays one: `respond` and transfers
        (which change no data) left out."""
        return [a for a in actions if a.name != RESPOND and self.tool_kind(a.name) != "transfer"]

    def reaches_gold(self, actions: Iterable[Action], task: Task) -> bool:
        """Whether the agent's tool calls `actions`, replayed (`tool_actions`), end in `task`'s gold database."""
        return same_state(self.base, self.end_state(actions, task), self.gold_changes(task.split, task.index))

    def gold_calls(self, task: Task) -> list[tuple[str, Action]]:
        """The gold solution's tool calls in order, as (requestor, action); `respond` and transfers skipped."""
        return [("assistant", a) for a in self.tool_actions(task.actions)]

    def gold_changes(self, split: str, index: int) -> dict:
        """The records the gold solution of a task changes (computed once per task and process)."""
        return self.end_state(self.task(split, index).actions)

    def end_state(self, actions: Iterable[Action], task: Task | None = None) -> dict:
        """The records a list of actions (a gold solution, or a variant of one the scripted models check) changes,
        replayed (`tool_actions`) from `task`'s initial state; remembered per list (and task, where tasks start
        from their own state) for the process's most recent 8,192."""
        where = (task.split, task.index) if task is not None and not self.tasks_share_initial_state else (None, None)
        return self._end_state(json.dumps([action.model_dump() for action in actions]), *where)

    @functools.lru_cache(maxsize=8192)
    def _end_state(self, actions_json: str, split: str | None, index: int | None) -> dict:
        task = self.task(split, index) if split is not None else None
        return self.replay(self.tool_actions(Action(**raw) for raw in json.loads(actions_json)), task).db.changes()

    def nl_assertions(self, task: Task) -> tuple[str, ...]:
        """The natural-language assertions a judge model must grade for the reward: tau-trait has none."""
        return ()

    def score(
        self,
        task: Task,
        db: EpisodeDatabase,
        agent_messages: list[str],
        judged: Sequence[NLAssertionCheck] | None = None,
    ) -> Score:
        """tau-bench's reward: the database equals the gold replay's, and every required output was said
        (`judged`, a judge's grades, counts only where `nl_assertions` asks for them: never in tau-trait)."""
        db_match = same_state(self.base, db.changes(), self.end_state(task.actions))
        said = [message.lower().replace(",", "") for message in agent_messages]
        found = tuple(output for output in task.outputs if any(output.lower() in text for text in said))
        missing = tuple(output for output in task.outputs if output not in found)
        reward = 1.0 if db_match and not missing else 0.0
        return Score(reward, db_match, found, missing)


@functools.cache
def _signature(function: Any) -> inspect.Signature:
    """A tool's call signature (computed once per tool and process)."""
    return inspect.signature(function)


def _invoke(tool: Any, db: EpisodeDatabase, kwargs: dict[str, Any]) -> ToolResult:
    """One tau-trait tool call; an exception becomes an error observation (tau-bench semantics)."""
    try:
        observation = tool.invoke(data=db, **kwargs)
    except Exception as err:
        return ToolResult(f"Error: {err}", False)
    if not isinstance(observation, str):
        observation = json.dumps(observation)
    return ToolResult(observation, not observation.startswith("Error"))


def _find_key(record: Any, key: str) -> Any:
    """The first value stored under `key` anywhere in a nested record."""
    if isinstance(record, dict):
        if key in record:
            return record[key]
        record = list(record.values())
    if isinstance(record, list):
        for value in record:
            found = _find_key(value, key)
            if found is not None:
                return found
    return None
