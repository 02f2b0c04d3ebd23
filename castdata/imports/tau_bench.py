"""`castdata import tau-bench`: tau-bench / tau-trait result files -> a run directory `label`, `build` and `report` read.

A result file (`historical_trajectories/*.json`, `run.py` output; `.json` or `.json.gz`) is a list of
`{task_id, trial, reward, info: {task, reward_info, ...}, traj}`. Each entry becomes one `castdata.trajectory/1`
record whose `messages` are `traj` (message indices are kept), with:

- the task matched to the domain's by user and gold actions (same id, else another id: `remapped`; a different
  instruction: `reworded`; no match: `unmatched`, scored against the entry's own gold task);
- the reward never taken from the file: the tool calls are replayed in castdata's environment and scored against
  the entry's own gold task, and every recorded tool result is checked; an episode that does not reproduce is kept,
  marked with its first mismatching step (`imported.first_mismatch`), and never counts for pass^k or training;
- the termination reason and protocol violations inferred from the transcript, and a minimal schema for any tool
  of the source harness that the domain lacks (`extra_tools` in the manifest).

Importing a file again adds nothing; an episode key already taken by another file is refused (use a trial offset).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from castdata.envs import Domain, Task, load_domain
from castdata.envs.reproduce import EXCERPT, Reproduction, replay_transcript
from castdata.envs.tau_import import tau_trait_version
from castdata.errors import InputError, RunDirConflict
from castdata.messages import calls
from castdata.models.spec import ModelSpec
from castdata.records import Action, ImportMark, MessageMeta, Mismatch, Outcome, Privileged, Trajectory, episode_id
from castdata.rundir import RecordWriter, RunDir, RunManifest
from castdata.version import __version__

FORMAT = "tau-bench"
STOP, TRANSFER = "###STOP###", "###TRANSFER###"
MISSING = ["timestamps", "seeds", "token usage and latency", "tool schemas (the domain's are used)"]
_UNKNOWN_TOOL_REPLIES = ("Unknown action", "Error")  # what a harness answers to a tool it does not have
_RAN_TOOL = "Error executing tool {name}:"  # ... unless the error says it ran the tool (and its arguments failed)


@dataclass
class ImportSummary:
    """What one import did, per file and in total (also merged into the run's manifest)."""

    sources: list[dict[str, Any]] = field(default_factory=list)
    remapped: list[dict[str, int]] = field(default_factory=list)
    reworded: list[int] = field(default_factory=list)
    unmatched: list[int] = field(default_factory=list)
    extra_tools: set[str] = field(default_factory=set)
    not_reproduced: list[dict[str, Any]] = field(default_factory=list)


def read_results(path: Path) -> list[dict[str, Any]]:
    """The entries of a tau-bench result file (`.json` or `.json.gz`); InputError naming the file when it is not one."""
    try:
        raw = path.read_bytes()
        data = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    except (OSError, ValueError, EOFError) as err:
        raise InputError(f"{path}: not a tau-bench result file: {err}") from None
    if not isinstance(data, list) or not all(isinstance(entry, dict) for entry in data):
        raise InputError(f"{path}: not a tau-bench result file: expected a JSON list of episodes")
    return data


def _actions(raw: list[dict[str, Any]]) -> tuple[Action, ...]:
    return tuple(Action(name=a["name"], kwargs=a.get("kwargs") or a.get("arguments") or {}) for a in raw)


def match_task(domain: Domain, split: str, task_id: int, source: dict[str, Any]) -> tuple[Task, str]:
    """The domain's task an entry was scored against, by user and gold actions, and how it matched."""
    user_id, actions = source["user_id"], _actions(source["actions"])
    tasks = domain.tasks(split)
    same = [tasks[task_id]] if 0 <= task_id < len(tasks) else []
    for candidate in same + [t for t in tasks if t.index != task_id]:
        if candidate.user_id == user_id and candidate.actions == actions:
            if candidate.index != task_id:
                return candidate, "remapped"
            return candidate, "same" if candidate.instruction == source.get("instruction") else "reworded"
    own = Task(
        domain.name, split, task_id, user_id, source.get("instruction", ""), actions, tuple(source.get("outputs") or ())
    )
    return own, "unmatched"


def _arguments(raw: Any) -> tuple[dict[str, Any] | None, Any]:
    """Tool-call arguments as a dict (None when they are not a JSON object), and the raw value."""
    if isinstance(raw, dict):
        return raw, raw
    try:
        parsed = json.loads(raw)
    except (TypeError, ValueError):
        return None, raw
    return (parsed, raw) if isinstance(parsed, dict) else (None, raw)


def convert_messages(traj: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[MessageMeta]]:
    """The transcript in castdata's message format (indices kept), and the protocol violations seen."""
    messages, meta = [], []
    for message in traj:
        role, violation, raw = message["role"], None, None
        if role == "assistant" and message.get("tool_calls"):
            emitted = calls(message)
            first = emitted[0]
            arguments, raw_arguments = _arguments(first.arguments)
            if len(emitted) > 1:
                violation = "multiple_tool_calls"
                raw = [{"name": c.name, "arguments": c.arguments} for c in emitted]
            elif message.get("content"):
                violation = "tool_call_with_text"
                raw = [{"name": first.name, "arguments": raw_arguments}]
            if arguments is None:
                violation, raw = "malformed_tool_call", {"name": first.name, "arguments": raw_arguments}
            call = {
                "id": first.id or f"call_{len(messages)}",
                "type": "function",
                "function": {"name": first.name, "arguments": arguments or {}},
            }
            messages.append({"role": "assistant", "content": message.get("content") or None, "tool_calls": [call]})
        elif role == "assistant":
            messages.append({"role": "assistant", "content": message.get("content") or ""})
            violation = None if message.get("content") else "empty_reply"
        elif role == "tool":
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": message.get("tool_call_id"),
                    "name": message.get("name"),
                    "content": message.get("content") or "",
                }
            )
        else:
            messages.append({"role": role, "content": message.get("content") or ""})
        meta.append(MessageMeta(t=0.0, violation=violation, raw=raw))
    return messages, meta


def extra_tools(domain: Domain, messages: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Tools the source harness had and the domain lacks (their calls got a non-error result, or an error raised
    while running them), with argument names."""
    found: dict[str, set[str]] = {}
    for step, message in enumerate(messages):
        for call in calls(message):
            name = call.name
            reply = messages[step + 1] if step + 1 < len(messages) else None
            text = (reply or {}).get("content") or ""
            answered = (
                reply is not None
                and reply["role"] == "tool"
                and (not text.startswith(_UNKNOWN_TOOL_REPLIES) or _RAN_TOOL.format(name=name) in text)
            )
            if domain.tool_kind(name) == "unknown" and answered:
                found.setdefault(name, set()).update(call.arguments)
    return found


def _minimal_schema(name: str, arguments: set[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": "A tool of the source harness that this domain lacks (reconstructed from its calls).",
            "parameters": {"type": "object", "properties": {a: {"type": "string"} for a in sorted(arguments)}},
        },
    }


def termination(
    domain: Domain, entry: dict[str, Any], messages: list[dict[str, Any]], reproduction: Reproduction
) -> str:
    """How the source episode ended, as far as the transcript shows."""
    if entry.get("info", {}).get("error"):
        return "infrastructure_error"
    last_user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    transferred = any(call.result.ok and domain.tool_kind(call.name) == "transfer" for call in reproduction.calls)
    if transferred or TRANSFER in last_user:
        return "transfer"
    if STOP in last_user and messages[-1]["role"] == "user":
        return "user_stop"
    return "max_steps"  # tau-bench's step limit ended it (its reward_info is then null)


def convert(
    domain: Domain,
    split: str,
    entry: dict[str, Any],
    where: ImportMark,
    agent: ModelSpec,
    user: ModelSpec,
    trial: int,
    summary: ImportSummary,
) -> Trajectory:
    """One result-file entry as a trajectory record, its reward recomputed and its reproduction checked."""
    info = entry.get("info") or {}
    task, how = match_task(domain, split, int(entry["task_id"]), info["task"])
    messages, meta = convert_messages(entry["traj"])
    extras = extra_tools(domain, messages)
    skip = frozenset(i for i, m in enumerate(meta) if m.violation == "malformed_tool_call")
    reproduction = replay_transcript(domain, messages, frozenset(extras), skip)
    said = [m["content"] for m in messages if m["role"] == "assistant" and m.get("content")]
    score = domain.score(task, reproduction.db, said)
    reason = termination(domain, entry, messages, reproduction)
    mismatch = reproduction.first_mismatch
    where = where.model_copy(
        update={
            "task_match": how,
            "reproduced": reproduction.reproduced,
            "first_mismatch": None
            if mismatch is None
            else Mismatch(
                step=mismatch.step,
                tool=mismatch.name,
                recorded=(mismatch.recorded or "")[:EXCERPT],
                replayed=mismatch.result.observation[:EXCERPT],
            ),
            "renamed_fields": sorted(reproduction.renamed_fields),
            "extra_tools": sorted(extras),
        }
    )
    summary.extra_tools |= set(extras)
    if how == "remapped":
        summary.remapped.append({"source_task_id": where.source_task_id, "task_id": task.index})
    elif how in ("reworded", "unmatched"):
        getattr(summary, how).append(where.source_task_id)
    if mismatch is not None:
        summary.not_reproduced.append(
            {"id": episode_id(domain.name, split, task.index, trial), "step": mismatch.step, "tool": mismatch.name}
        )
    return Trajectory(
        id=episode_id(domain.name, split, task.index, trial),
        domain=domain.name,
        split=split,
        task_id=task.index,
        trial=trial,
        seed=0,
        agent=agent,
        user=user,
        tools=domain.tool_schemas + [_minimal_schema(name, args) for name, args in sorted(extras.items())],
        messages=messages,
        meta=meta,
        outcome=Outcome(
            reward=score.reward if reason != "infrastructure_error" else 0.0,
            db_match=score.db_match,
            outputs_found=list(score.outputs_found),
            outputs_missing=list(score.outputs_missing),
            termination_reason=reason,
            error=str(info["error"])[:EXCERPT] if info.get("error") else None,
        ),
        privileged=Privileged(
            user_id=task.user_id,
            instruction=info["task"].get("instruction", task.instruction),
            gold_actions=list(task.actions),
            required_outputs=list(task.outputs),
        ),
        imported=where,
        started_at=0.0,
        ended_at=0.0,
    )


def _refusal(entry: Any) -> str | None:
    """Why an entry cannot be imported, or None."""
    if not isinstance(entry, dict) or "task_id" not in entry or not isinstance(entry.get("traj"), list):
        return "not an episode (needs task_id and traj)"
    task = (entry.get("info") or {}).get("task")
    if not isinstance(task, dict) or "user_id" not in task or "actions" not in task:
        error = (entry.get("info") or {}).get("error")
        return f"no task recorded (the harness failed: {str(error)[:120]})" if error else "no task recorded (info.task)"
    if not entry["traj"]:
        return "empty transcript"
    return None


def _existing(run: RunDir) -> dict[tuple, ImportMark | None]:
    """The episodes a run directory already holds, by key, with their import marks."""
    return {t.key: t.imported for t in run.iter_trajectories()}


def _manifest(run: RunDir, domain: str, split: str, agent: ModelSpec, user: ModelSpec) -> dict[str, Any]:
    manifest = run.manifest()
    if manifest is None:
        return {
            "schema": "castdata.run/1",
            "import": {"format": FORMAT, "domain": domain, "split": split},
            "agent": agent.model_dump(mode="json"),
            "user": user.model_dump(mode="json"),
            "missing": MISSING,
            "sources": [],
            "tasks": {"remapped": [], "reworded": [], "unmatched": []},
            "extra_tools": [],
            "not_reproduced": [],
        }
    manifest = manifest.to_dict()
    if "import" not in manifest:
        raise RunDirConflict(f"{run.where}: holds a collected run; import into another --out")
    return manifest


def import_tau_bench(
    files: list[Path],
    out: Path,
    domain_name: str,
    split: str = "test",
    agent_model: str | None = None,
    user_model: str | None = None,
    trial_offset: int = 0,
) -> dict:
    """Import result files into the run directory `out`; returns the updated manifest."""
    domain = load_domain(domain_name)
    domain.tasks(split)  # an unknown split fails here, before anything is written
    agent = ModelSpec(backend="openai", model=agent_model or "unknown")
    user = ModelSpec(backend="openai", model=user_model or "unknown")
    entries = [(path, read_results(path)) for path in files]  # every file parses before anything is written
    run = RunDir(out)
    manifest = _manifest(run, domain_name, split, agent, user)
    run.repair()
    existing, summary, writer = _existing(run), ImportSummary(), RecordWriter()
    try:
        for path, results in entries:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            source = {
                "path": str(path.resolve()),
                "name": path.name,
                "sha256": digest,
                "entries": len(results),
                "imported": 0,
                "already_imported": 0,
                "refused": [],
            }
            for index, entry in enumerate(results):
                reason = _refusal(entry)
                trial = int(entry.get("trial") or 0) + trial_offset if isinstance(entry, dict) else 0
                if reason is None:
                    record = convert(
                        domain,
                        split,
                        entry,
                        ImportMark(
                            format=FORMAT,
                            file=path.name,
                            sha256=digest,
                            index=index,
                            source_task_id=int(entry["task_id"]),
                            source_trial=int(entry.get("trial") or 0),
                            source_reward=entry.get("reward"),
                            task_match="same",
                            reproduced=True,
                        ),
                        agent,
                        user,
                        trial,
                        summary,
                    )
                    previous = existing.get(record.key, False)
                    if previous is False:
                        writer.append(run.trajectory_file(domain_name, split), record.to_json())
                        existing[record.key] = record.imported
                        source["imported"] += 1
                        continue
                    if previous is not None and (previous.sha256, previous.index) == (digest, index):
                        source["already_imported"] += 1
                        continue
                    reason = f"episode {record.id} is already in the run from another source (use --trial-offset)"
                source["refused"].append(
                    {
                        "index": index,
                        "task_id": entry.get("task_id") if isinstance(entry, dict) else None,
                        "reason": reason,
                    }
                )
            manifest["sources"] = [s for s in manifest["sources"] if s["sha256"] != digest] + [source]
    finally:
        writer.close()
    _merge(manifest, summary)
    records = list(run.iter_trajectories())
    manifest["counts"] = {
        "episodes": len(records),
        "reproduced": sum(1 for r in records if r.imported and r.imported.reproduced),
        "not_reproduced": sum(1 for r in records if r.imported and not r.imported.reproduced),
        "infrastructure_error": sum(1 for r in records if r.outcome.termination_reason == "infrastructure_error"),
        "successes": sum(1 for r in records if r.counts_for_pass_k and r.outcome.reward == 1.0),
    }
    manifest["versions"] = {
        "castdata": __version__,
        "tau_trait": tau_trait_version(),
        "python": platform.python_version(),
    }
    run.write_manifest(RunManifest.model_validate(manifest))
    return manifest


def _merge(manifest: dict[str, Any], summary: ImportSummary) -> None:
    """Add what this import found to the manifest's lists, without repeats."""
    tasks = manifest["tasks"]
    for name in ("remapped", "reworded", "unmatched"):
        for item in getattr(summary, name):
            if item not in tasks[name]:
                tasks[name].append(item)
    manifest["extra_tools"] = sorted(set(manifest["extra_tools"]) | summary.extra_tools)
    known = {item["id"] for item in manifest["not_reproduced"]}
    manifest["not_reproduced"] += [item for item in summary.not_reproduced if item["id"] not in known]
