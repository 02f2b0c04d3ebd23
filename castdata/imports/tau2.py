"""`castdata import tau2 RESULTS.json --out RUN_DIR`: tau2-bench result files as castdata trajectory records.

The source's reward is never trusted. Each simulation's task is castdata's own task of that tau2 id; its tool
calls (the agent's and, in dual control, the user's) are replayed in order on a fresh episode database, every
recorded tool result is checked against the replay (tau2's rule: equal as JSON where it parses, else as text),
and the reward is recomputed with castdata's tau2 reward (a premature termination scores 0, as in tau2). An
episode whose replay does not reproduce is kept, with `outcome.excluded` naming the first mismatching message:
it counts for neither pass^k nor training. A tau2 message with several tool calls becomes that many agent turns,
each followed by its result; the user's own calls go to `user_tool_calls`, never to `messages`. A call runs when
its result comes (tau2's order): a call the episode ended before answering (at `max_steps`, on an agent error)
never ran in tau2 and does not run here.

Files are read as tau2 26.3 writes them (`Results.save`, or its run checkpoint that appends each simulation as it
ends). A file that is not JSON (a run killed while writing it: truncated) or not of tau2's shape is an error naming
the file and the first bad field, before anything is written. A sample tau2 skipped after an error
(`skip_failed_samples`: no messages, `skipped`) is imported as an `infrastructure_error` episode: it says nothing
about the agent.

Records go through `castdata.rundir` (`trajectories/{domain}.{split}.jsonl`); `imported` (the import mark every
importer writes) keeps the file, its sha256, the tau2 simulation id and the claimed reward. Importing the same simulation again adds nothing; another simulation of
the same task takes the next free trial number.
"""

from __future__ import annotations

import hashlib
import json
import platform
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from castdata.envs import load_domain
from castdata.envs.catalog import TAU2_DOMAINS
from castdata.envs.tau2_domain import Tau2Domain
from castdata.envs.tau2_import import tau2_module, tau2_version
from castdata.errors import InputError, RunDirConflict
from castdata.models.spec import ModelSpec
from castdata.records import Action, ImportMark, MessageMeta, Outcome, Privileged, Trajectory, UserToolCall, episode_id
from castdata.rundir import RecordWriter, RunDir, RunManifest
from castdata.version import __version__

IMPORT_FORMAT = "tau2"
SKIPPED = "tau2 skipped this sample after an error (skip_failed_samples): no conversation"
TERMINATIONS = {
    "user_stop": "user_stop",
    "agent_stop": "agent_stop",
    "judge_stop": "user_stop",
    "max_steps": "max_steps",
    "too_many_errors": "too_many_errors",
    "agent_error": "agent_error",
    "user_error": "user_error",
}


def import_tau2(files: list[Path], out: Path) -> dict:
    """Import tau2 `results.json` files into the run directory `out`; returns the manifest (with counts)."""
    results_model = tau2_module("data_model.simulation").Results
    run = RunDir(out)
    previous = _previous_manifest(run)
    existing = list(run.iter_trajectories())
    seen = {t.imported.source_id for t in existing if t.imported is not None}
    trials = Counter((t.domain, t.split, t.task_id) for t in existing)
    counts: Counter = Counter()
    writer = RecordWriter()
    try:
        for path, (results, digest) in zip(files, [_read(Path(path), results_model) for path in files]):
            domain = load_domain(f"tau2-{results.info.environment_info.domain_name}")
            agent, user = _spec(results.info.agent_info), _spec(results.info.user_info)
            for index, simulation in enumerate(results.simulations):
                task = domain.locate(simulation.task_id)
                if simulation.id in seen or task is None:
                    counts["already_imported" if task is not None else "unknown_task"] += 1
                    continue
                key = (domain.name, task.split, task.index)
                mark = ImportMark(
                    format=IMPORT_FORMAT,
                    file=Path(path).name,
                    sha256=digest,
                    index=index,
                    source_task_id=simulation.task_id,
                    source_trial=simulation.trial or 0,
                    source_reward=None,
                    task_match="same",
                    reproduced=True,
                    source_id=simulation.id,
                )
                record = trajectory(domain, task, simulation, trials[key], agent, user, mark)
                trials[key] += 1
                seen.add(simulation.id)
                writer.append(run.trajectory_file(domain.name, task.split), record.to_json())
                counts["imported"] += 1
                counts["not_reproduced"] += record.outcome.excluded is not None
    finally:
        writer.close()
    manifest = _manifest(run, previous, files, counts)
    run.write_manifest(RunManifest.model_validate(manifest))
    return manifest


def _read(path: Path, results_model: Any) -> tuple[Any, str]:
    """A tau2 results file (its `Results` and sha256); `InputError` naming the file and what is wrong with it."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise InputError(f"{path}: cannot read the tau2 results file: {err.strerror or err}") from None
    try:
        data = json.loads(raw)
    except ValueError as err:
        raise InputError(f"{path}: not JSON (truncated?): {err}") from None
    try:
        results = results_model.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the file"
        raise InputError(f"{path}: not a tau2 results file: {where}: {first['msg']}") from None
    name = results.info.environment_info.domain_name
    if f"tau2-{name}" not in TAU2_DOMAINS:
        allowed = ", ".join(domain.removeprefix("tau2-") for domain in TAU2_DOMAINS)
        raise InputError(
            f"{path}: info.environment_info.domain_name: no castdata domain for '{name}'; allowed: {allowed}"
        )
    return results, hashlib.sha256(raw).hexdigest()


def trajectory(
    domain: Tau2Domain, task, simulation: Any, trial: int, agent: ModelSpec, user: ModelSpec, mark: ImportMark
) -> Trajectory:
    """One tau2 simulation as a castdata record: replayed, checked and rescored (see the module docstring)."""
    flat = _flat(simulation.messages)
    replay = domain.replay((), task)  # each call runs when its result arrives: one never answered never ran
    messages: list[dict[str, Any]] = [{"role": "system", "content": domain.policy}]
    meta = [MessageMeta(t=_time(simulation.start_time))]
    user_calls: list[UserToolCall] = []
    said: list[str] = []
    calls: dict[str, tuple[Any, str | None]] = {}  # id -> (tau2 call, text of its message), until its result
    mismatch: str | None = None
    for number, message in enumerate(flat):
        when = MessageMeta(t=_time(message.timestamp))
        if message.role == "tool":
            call, text = calls.pop(message.id, (None, None))
            if call is None:
                mismatch = mismatch or f"tau2 message {number}: a tool result without its call"
                continue
            result = replay.run(Action(name=call.name, kwargs=call.arguments), call.requestor).result
            recorded = message.content or ""
            if _loads(recorded) != _loads(result.observation):
                mismatch = mismatch or f"tau2 message {number}: {call.name} returned another result on replay"
            if call.requestor == "user":
                user_calls.append(
                    UserToolCall(
                        step=len(messages),
                        id=call.id,
                        name=call.name,
                        arguments=call.arguments,
                        content=recorded,
                        ok=result.ok,
                    )
                )
                continue
            function = {"name": call.name, "arguments": call.arguments}
            messages += [
                {
                    "role": "assistant",
                    "content": text,
                    "tool_calls": [{"id": call.id, "type": "function", "function": function}],
                },
                {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": recorded},
            ]
            meta += [when, when]
            continue
        if message.role not in ("assistant", "user"):
            continue
        text = message.content if message.has_text_content() else None
        if message.role == "assistant" and text:
            said.append(text)
        for index, call in enumerate(message.tool_calls or []):
            calls[call.id] = (call, text if index == 0 else None)
        if text and not (message.role == "assistant" and message.tool_calls):
            messages.append({"role": message.role, "content": text})
            meta.append(when)
    termination = "infrastructure_error" if simulation.skipped else TERMINATIONS[simulation.termination_reason.value]
    premature = termination in domain.zero_reward_terminations  # scores 0: tau2 evaluates nothing
    if calls and not premature:
        mismatch = mismatch or f"{len(calls)} tool call(s) without a recorded result"
    score = domain.score(task, replay.db, said)
    claimed = simulation.reward_info.reward if simulation.reward_info is not None else None
    return Trajectory(
        id=episode_id(domain.name, task.split, task.index, trial),
        domain=domain.name,
        split=task.split,
        task_id=task.index,
        trial=trial,
        seed=simulation.seed or 0,
        agent=agent,
        user=user,
        tools=domain.tool_schemas,
        messages=messages,
        meta=meta,
        outcome=Outcome(
            reward=0.0 if premature else score.reward,
            db_match=score.db_match,
            outputs_found=list(score.outputs_found),
            outputs_missing=list(score.outputs_missing),
            termination_reason=termination,
            error=SKIPPED if simulation.skipped else None,
            excluded=f"not reproduced: {mismatch}" if mismatch else None if premature else score.excluded,
        ),
        privileged=Privileged.of(task),
        user_tool_calls=user_calls,
        imported=mark.model_copy(update={"source_reward": claimed, "reproduced": mismatch is None}),
        started_at=_time(simulation.start_time),
        ended_at=_time(simulation.end_time),
    )


def _flat(messages: list[Any]) -> list[Any]:
    """tau2's messages with each multi-tool message opened into its tool messages."""
    return [part for message in messages for part in (getattr(message, "tool_messages", None) or [message])]


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _time(stamp: str | None) -> float:
    """A tau2 ISO timestamp as epoch seconds (0.0 when absent or unreadable)."""
    try:
        return datetime.fromisoformat(stamp).timestamp() if stamp else 0.0
    except ValueError:
        return 0.0


def _spec(info: Any) -> ModelSpec:
    """The model spec of a tau2 agent or user (its LLM, else its implementation's name)."""
    return ModelSpec(backend="openai", model=info.llm or info.implementation)


def _previous_manifest(run: RunDir) -> dict:
    manifest = run.manifest()
    previous = manifest.to_dict() if manifest is not None else {}
    if previous and (previous.get("config") or {}).get("import") != IMPORT_FORMAT:
        raise RunDirConflict(f"{run.where}: holds a run that was not imported from tau2; import into another --out")
    return previous


def _manifest(run: RunDir, previous: dict, files: list[Path], counts: Counter) -> dict:
    """collect's manifest shape; `config` names the imported files and, as a collect config does, what the run holds
    (domains, splits, trials; tasks `imported`, no seed)."""
    keys = {t.key for t in run.iter_trajectories()}
    config = {
        "import": IMPORT_FORMAT,
        "files": sorted(set(previous.get("config", {}).get("files", [])) | {str(Path(f)) for f in files}),
        "domains": sorted({key[0] for key in keys}),
        "split": sorted({key[1] for key in keys}),
        "tasks": "imported",
        "trials": max((key[3] + 1 for key in keys), default=0),
        "seed": None,
    }
    now = time.time()
    return {
        "schema": "castdata.run/1",
        "config": config,
        "config_fingerprint": hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16],
        "versions": {"castdata": __version__, "tau2": tau2_version(), "python": platform.python_version()},
        "started_at": previous.get("started_at", now),
        "ended_at": now,
        "counts": {key: counts[key] for key in ("imported", "already_imported", "not_reproduced", "unknown_task")}
        | {"finished": len(run.finished_keys())},
    }
