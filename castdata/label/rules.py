"""Policy rule checks: per-action violations any episode can have, whatever its outcome (severity minor).

- `rule.no_confirmation`: a write whose latest user turn is not an explicit yes, or whose yes an earlier
  write already used;
- `rule.unconfirmed_details`: a confirmed write with an identifier argument the confirmation request did not
  list, where the request listed another identifier of the same shape (the user said yes to other details);
- `rule.before_auth`: a tool call that reads or writes data before an authentication tool succeeded (in a
  domain without one, airline, before the user gave their user id)
  (`calculate` and `think` touch no data);
- `rule.multiple_tool_calls`, `rule.tool_call_with_text`: the protocol violations the episode loop recorded;
- `rule.malformed_tool_call`, `rule.unknown_tool`, `rule.empty_reply`: unusable turns;
- `rule.unneeded_transfer`: a transfer to a human when the gold solution has none (the task did not need one).
"""

from __future__ import annotations

import json
import re

from castdata.envs import RESPOND, Domain
from castdata.label.findings import Finding
from castdata.label.visible import identifiers
from castdata.records import Action, Trajectory

NO_DATA_TOOLS = frozenset({"calculate", "think"})
_YES = re.compile(r"\b(yes|yep|yeah|confirm|confirmed|go ahead|proceed)\b", re.I)
_NO = re.compile(r"^\W*(no|nope|don't|do not|not)\b", re.I)

_VIOLATIONS = {
    "multiple_tool_calls": "policy_violation",
    "tool_call_with_text": "policy_violation",
    "malformed_tool_call": "schema_error",
    "unknown_tool": "schema_error",
    "empty_reply": "miscommunication",
}


def is_confirmation(text: str) -> bool:
    """Whether a user message is an explicit yes."""
    return bool(_YES.search(text)) and not _NO.match(text)


def ask_to_confirm(action: Action) -> Action:
    """The message a careful agent sends instead of an unconfirmed write."""
    what = action.name.replace("_", " ")
    text = f"Before I proceed, please confirm: I will {what} with these details: {json.dumps(action.kwargs)}. Shall I go ahead (yes/no)?"
    return Action(name=RESPOND, kwargs={"content": text})


def ask_to_authenticate(domain: Domain) -> Action:
    """The message a careful agent sends instead of accessing data before authentication."""
    text = f"Before I can look into this, I need to verify your identity. Could you please provide {domain.catalog.auth_hint}?"
    return Action(name=RESPOND, kwargs={"content": text})


def _shape(token: str) -> str:
    return re.sub(r"\d", "0", token)


def deviates(action: Action, request: str) -> bool:
    """Whether a write uses an identifier where the confirmed request listed another one of the same shape."""
    listed = set(identifiers(request))
    shapes = {_shape(token) for token in listed}
    return any(token not in listed and _shape(token) in shapes for token in identifiers(json.dumps(action.kwargs)))


def rule_findings(trajectory: Trajectory, domain: Domain) -> list[Finding]:
    """Every policy rule violation of an episode, in step order."""
    findings: list[Finding] = []
    authenticated = False
    confirmed = False  # the latest user turn is a yes no write has used yet
    said, request = "", ""  # the agent's latest message, and the one the latest user turn answered
    gold_transfers = any(domain.tool_kind(a.name) == "transfer" for a in trajectory.privileged.gold_actions)
    messages = trajectory.messages
    for step, message in enumerate(messages):
        if message["role"] == "user":
            confirmed, request = is_confirmation(message.get("content") or ""), said
            # a domain without a lookup tool (airline) only asks the agent to obtain the user id from the user
            if not domain.catalog.auth_tools and trajectory.privileged.user_id in (message.get("content") or ""):
                authenticated = True
            continue
        if message["role"] != "assistant":
            continue
        violation = trajectory.meta[step].violation
        calls = message.get("tool_calls")
        action = None
        if calls:
            function = calls[0]["function"]
            action = Action(name=function["name"], kwargs=function["arguments"])
        if violation in _VIOLATIONS:
            expected = action if violation in ("multiple_tool_calls", "tool_call_with_text") else None
            findings.append(Finding(step, f"rule.{violation}", _VIOLATIONS[violation], "minor", expected))
        if action is None:
            said = message.get("content") or ""
            continue
        kind = domain.tool_kind(action.name)
        ok = step + 1 < len(messages) and not str(messages[step + 1].get("content") or "").startswith("Error")
        if kind in ("read", "write") and not authenticated and action.name not in domain.catalog.auth_tools | NO_DATA_TOOLS:
            findings.append(Finding(step, "rule.before_auth", "auth_violation", "minor", ask_to_authenticate(domain)))
        if kind == "write":
            if not confirmed:
                findings.append(Finding(step, "rule.no_confirmation", "missing_confirmation", "minor", ask_to_confirm(action)))
            elif deviates(action, request):
                findings.append(Finding(step, "rule.unconfirmed_details", "wrong_argument", "minor"))
            confirmed = False  # a yes covers one write
        if kind == "transfer" and not gold_transfers:
            findings.append(Finding(step, "rule.unneeded_transfer", "unnecessary_transfer", "minor"))
        authenticated = authenticated or (ok and action.name in domain.catalog.auth_tools)
    return findings
