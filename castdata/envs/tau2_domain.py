"""tau2-bench's airline, retail and telecom domains behind castdata's `Domain` interface.

- **Tools and observations are tau2's own**: a call runs through tau2's `Environment.get_response` on the
  episode's environment (so error texts, JSON rendering and telecom's user/agent state sync are tau2's).
- **Episode-private databases, copy on write**: tau2's pydantic databases are read once per process; each
  dict-of-records field becomes a table of pickled records, copied into an episode the first time a tool
  touches one (other fields, e.g. telecom's lists and the user's phone, are one record each). Records are
  fingerprinted with tau2's own hash function, so "the end state equals the gold replay's" is decided record
  by record exactly as tau2 decides it on the whole database's hash.
- **Dual control (telecom)**: the user's tools act on the user's phone (tables `user.*`); `execute(...,
  requestor="user")` runs them. Gold solutions interleave agent and user calls: `Task.actions` holds the agent's,
  `Task.user_actions` the user's (with how many agent calls come before each).
- **Reward with tau2's semantics** for each task's `reward_basis`: DB (agent and user databases equal the gold
  replay's), ENV_ASSERTION (tau2's assertion functions on the episode's environment), ACTION (every gold call
  matched by some call of the episode, tau2's `compare_with_tool_call`), COMMUNICATE (each `communicate_info`
  in some agent message, lower-cased, commas removed), NL_ASSERTION (every natural-language assertion met, as a
  judge model graded them: `castdata.models.judge`). Without the judge's grades a task whose basis has
  NL_ASSERTION is reported as not judged (`Score.excluded`, reward 0), never scored.
- **Splits**: tau2's `train` and `test`; telecom also `full`: tau2's full task set less its test tasks.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import pickle
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from castdata.envs.catalog import CATALOG
from castdata.envs.database import BaseDatabase, BaseTable, EpisodeDatabase, same_state
from castdata.envs.domain import Domain, Score, Task, ToolResult
from castdata.envs.tau2_import import tau2_module
from castdata.errors import UnknownName
from castdata.records import NOT_JUDGED, Action, NLAssertionCheck

USER_PREFIX = "user."  # tables of the user's own database (dual control)


def plain(value: Any) -> Any:
    """A record as tau2 dumps it for its database hash (`model_dump()`, recursively through lists and dicts)."""
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    return value


class PydanticTable(BaseTable):
    """A table of tau2 pydantic records: pickled, fingerprinted with tau2's `get_dict_hash`."""

    @staticmethod
    def encode(value: Any) -> bytes:
        return pickle.dumps(value, protocol=5)

    @staticmethod
    def decode(blob: bytes) -> Any:
        return pickle.loads(blob)

    @staticmethod
    def digest(value: Any) -> str:
        return hashlib.sha256(json.dumps(plain(value), sort_keys=True, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class ToolInfo:
    """A tool as castdata's tool code reads it (`get_info()` is its OpenAI function schema)."""

    schema: dict[str, Any]

    def get_info(self) -> dict[str, Any]:
        """The OpenAI function schema."""
        return self.schema


class Tau2Database(EpisodeDatabase):
    """One episode's state: copy-on-write tables, the tau2 environment over them, and every call made."""

    def __init__(self, domain: Tau2Domain) -> None:
        super().__init__(domain.base)
        self.calls: list[Any] = []  # tau2 ToolCalls, in order, by agent and user (for ACTION)
        self.env = copy.copy(domain.env)
        self.env.tools = type(domain.env.tools)(self._model(domain.env.tools.db, ""))
        if domain.env.user_tools is not None:
            self.env.user_tools = type(domain.env.user_tools)(self._model(domain.env.user_tools.db, USER_PREFIX))

    def _model(self, db: Any, prefix: str) -> Any:
        fields = {}
        for name in type(db).model_fields:
            table = self[prefix + name]
            fields[name] = table if isinstance(getattr(db, name), dict) else table[""]
        return type(db).model_construct(**fields)


def _tables(db: Any, prefix: str) -> dict[str, dict[str, Any]]:
    return {prefix + name: value if isinstance(value, dict) else {"": value} for name, value in db}


class Tau2Domain(Domain):
    """A tau2-bench domain (`tau2-airline`, `tau2-retail`, `tau2-telecom`), loaded once per process."""

    tasks_share_initial_state = False  # a task's initialization actions set its own start

    # tau2 scores an episode only when the agent or the user ended it (`evaluate_simulation`)
    zero_reward_terminations = frozenset(
        {"max_steps", "too_many_errors", "agent_error", "user_error", "infrastructure_error"}
    )

    def __init__(self, name: str) -> None:  # tau2 data, not tau-trait modules: Domain.__init__ is not run
        self.name = name
        self.catalog = CATALOG[name]
        self.short = name.removeprefix("tau2-")
        module = tau2_module(f"domains.{self.short}.environment")
        self._module = module
        self._tool_call = tau2_module("data_model.message").ToolCall
        self.env = module.get_environment()
        self.tool_schemas = [tool.openai_schema for tool in self.env.get_tools()]
        self.tools = {schema["function"]["name"]: ToolInfo(schema) for schema in self.tool_schemas}
        user_tools = self.env.get_user_tools() if self.env.user_tools is not None else []
        self.user_tool_schemas = [tool.openai_schema for tool in user_tools]
        self.policy = self.env.get_policy()
        self.rules = []
        tables = _tables(self.env.tools.db, "")
        if self.env.user_tools is not None:
            tables |= _tables(self.env.user_tools.db, USER_PREFIX)
        self.base = BaseDatabase(tables, PydanticTable)
        self._tasks: dict[str, tuple[Task, ...]] = {}
        self._sources: dict[tuple[str, int], Any] = {}  # (split, index) -> tau2 Task

    # -- tools ------------------------------------------------------------------------------------
    def user_tool_kind(self, name: str) -> str:
        """`write`, `read`, or `unknown` for a tool of the user's (tau2's own `ToolType`)."""
        tools = self.env.user_tools
        if tools is None or not tools.has_tool(name):
            return "unknown"
        return "write" if tools.tool_type(name).value == "write" else "read"

    def new_database(self, task: Task | None = None) -> Tau2Database:
        """A private copy-on-write database for one episode, in `task`'s initial state (tau2's `set_state`)."""
        db = Tau2Database(self)
        state = self.source(task).initial_state if task is not None else None
        if state is not None:
            for call in state.initialization_actions or []:
                db.env.run_env_function_call(call)
            db.env.sync_tools()
        return db

    def execute(self, db: Tau2Database, name: str, kwargs: dict[str, Any], requestor: str = "assistant") -> ToolResult:
        """Run one tool call through tau2's `Environment.get_response` (errors become observations)."""
        if not isinstance(kwargs, dict):
            return ToolResult(f"Error: arguments of '{name}' must be a JSON object", False)
        call = self._tool_call(id=f"call_{len(db.calls)}", name=name, arguments=kwargs, requestor=requestor)
        db.calls.append(call)
        response = db.env.get_response(call)
        return ToolResult(response.content or "", not response.error)

    # -- tasks ------------------------------------------------------------------------------------
    @functools.cache
    def _split_ids(self) -> dict[str, list[str]]:
        tau2 = self._module.get_tasks_split()
        splits = {"train": tau2["train"], "test": tau2["test"]}
        if "full" in tau2:
            test = set(tau2["test"])
            splits["full"] = [task_id for task_id in tau2["full"] if task_id not in test]
        return splits

    def splits(self) -> tuple[str, ...]:
        """The splits this domain ships tasks for."""
        return tuple(self._split_ids())

    @functools.cache
    def _all_tasks(self) -> dict[str, Any]:
        return {task.id: task for task in self._module.get_tasks(None)}

    def tasks(self, split: str) -> tuple[Task, ...]:
        """All tasks of a split, in tau2's order (the castdata task id is the index, `source(task).id` tau2's)."""
        if split not in self._tasks:
            if split not in self._split_ids():
                allowed = ", ".join(self.splits())
                raise UnknownName(f"split: unknown split '{split}' for domain '{self.name}'; allowed: {allowed}")
            every = self._all_tasks()
            sources = [every[task_id] for task_id in self._split_ids()[split]]
            for index, source in enumerate(sources):
                self._sources[(split, index)] = source
            self._tasks[split] = tuple(self._task(split, index, source) for index, source in enumerate(sources))
        return self._tasks[split]

    def _task(self, split: str, index: int, source: Any) -> Task:
        state = source.initial_state
        if state is not None and (state.initialization_data is not None or state.message_history):
            raise UnknownName(f"{self.name}: task {source.id} starts from data or a history castdata cannot set up")
        criteria = source.evaluation_criteria
        gold = list(criteria.actions or []) if criteria is not None else []
        agent = [Action(name=a.name, kwargs=a.arguments) for a in gold if a.requestor == "assistant"]
        user, before = [], 0
        for action in gold:
            if action.requestor == "assistant":
                before += 1
            else:
                user.append((before, Action(name=action.name, kwargs=action.arguments)))
        outputs = tuple(criteria.communicate_info or []) if criteria is not None else ()
        return Task(
            self.name,
            split,
            index,
            _user_id(source, agent),
            str(source.user_scenario),
            tuple(agent),
            outputs,
            tuple(user),
        )

    def source(self, task: Task) -> Any:
        """tau2's own task object behind a castdata task."""
        self.tasks(task.split)
        return self._sources[(task.split, task.index)]

    def locate(self, tau2_id: str) -> Task | None:
        """The castdata task of a tau2 task id (its test split first), or None when no split has it."""
        for split in ("test", "train", "full"):
            ids = self._split_ids().get(split, [])
            if tau2_id in ids:
                return self.tasks(split)[ids.index(tau2_id)]
        return None

    def nl_assertions(self, task: Task) -> tuple[str, ...]:
        """The natural-language assertions a judge must grade for the reward (none unless NL_ASSERTION is in the
        reward basis; an NL_ASSERTION basis without assertions is met, as in tau2)."""
        criteria = self.source(task).evaluation_criteria
        if criteria is None or all(basis != "NL_ASSERTION" for basis in criteria.reward_basis):
            return ()
        return tuple(criteria.nl_assertions or ())

    def scorable_offline(self, task: Task) -> bool:
        """Whether the reward needs no judge model."""
        return not self.nl_assertions(task)

    def auth_action(self, task: Task) -> Action | None:
        """The gold auth call or a lookup by email (as for tau-trait), else, in telecom, a lookup by the phone number
        the user's phone is set up with."""
        found = super().auth_action(task)
        phone = _phone(self.source(task))
        if found is None and phone is not None and "get_customer_by_phone" in self.tools:
            return Action(name="get_customer_by_phone", kwargs={"phone_number": phone})
        return found

    @staticmethod
    def _plain(record: Any) -> Any:
        return plain(record)

    def gold_calls(self, task: Task) -> list[tuple[str, Action]]:
        """Every gold call in tau2's order, agent's and user's, as (requestor, action)."""
        criteria = self.source(task).evaluation_criteria
        actions = criteria.actions or [] if criteria is not None else []
        return [(a.requestor, Action(name=a.name, kwargs=a.arguments)) for a in actions]

    # -- reward -----------------------------------------------------------------------------------
    @functools.cache
    def gold_changes(self, split: str, index: int) -> dict:
        """The records the gold solution changes, replayed as tau2's evaluator does (`make_tool_call`, no sync)."""
        task = self.task(split, index)
        return self.replay(self.gold_calls(task), task, self._evaluator_call).db.changes()

    @staticmethod
    def _evaluator_call(db: Tau2Database, name: str, kwargs: dict[str, Any], requestor: str) -> ToolResult:
        """One gold call as tau2's evaluator makes it: `make_tool_call`, no sync; a failing call is logged and
        skipped (an error result here)."""
        try:
            return ToolResult(str(db.env.make_tool_call(name, requestor=requestor, **kwargs)), True)
        except Exception as err:  # tau2 logs a failing gold call and goes on
            return ToolResult(f"Error: {err}", False)

    def score(
        self,
        task: Task,
        db: Tau2Database,
        agent_messages: list[str],
        judged: Sequence[NLAssertionCheck] | None = None,
    ) -> Score:
        """tau2's reward for `task`'s reward basis (see the module docstring); `judged`: a judge's grades of the
        task's natural-language assertions."""
        criteria = self.source(task).evaluation_criteria
        said = [message.lower().replace(",", "") for message in agent_messages]
        found = tuple(info for info in task.outputs if any(info.lower() in text for text in said))
        missing = tuple(info for info in task.outputs if info not in found)
        if criteria is None:
            return Score(1.0, True, found, missing)
        db_match = criteria.actions is None and criteria.env_assertions is None
        db_match = db_match or same_state(self.base, db.changes(), self.gold_changes(task.split, task.index))
        if not self.scorable_offline(task) and judged is None:
            return Score(0.0, db_match, found, missing, excluded=NOT_JUDGED)
        parts = {
            "DB": db_match,
            "ENV_ASSERTION": all(
                db.env.run_env_assertion(a, raise_assertion_error=False) for a in criteria.env_assertions or []
            ),
            "ACTION": all(
                any(gold.compare_with_tool_call(call) for call in db.calls) for gold in criteria.actions or []
            ),
            "COMMUNICATE": not missing,
            "NL_ASSERTION": all(check.met for check in judged or ()),
        }
        reward = 1.0 if all(parts[basis.value] for basis in criteria.reward_basis) else 0.0
        return Score(reward, db_match, found, missing)


def _user_id(source: Any, agent: list[Action]) -> str:
    """The task's user: a gold `user_id` argument, one the instructions state, or the user's phone number."""
    found = next((a.kwargs["user_id"] for a in agent if "user_id" in a.kwargs), None)
    if found is None:
        known = getattr(source.user_scenario.instructions, "known_info", None) or ""
        match = re.search(r"user id is\s+([\w-]+)", known, re.IGNORECASE)
        found = match.group(1) if match else _phone(source)
    return found or ""


def _phone(source: Any) -> str | None:
    """The phone number a telecom task sets the user's phone up with."""
    state = source.initial_state
    for call in (state.initialization_actions or []) if state is not None else []:
        if call.func_name == "set_user_info" and "phone_number" in call.arguments:
            return call.arguments["phone_number"]
    return None
