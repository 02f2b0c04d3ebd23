"""The simulated user's fault (or the task's): failed episodes where no agent action is to blame.

Checked, in hindsight, on the episode's first critical finding (privileged: the hidden instruction and the gold
solution are used for the verdict only, never in a rationale):

- `fault.user_stopped`: the user's last turn said yes and ended the conversation in the same breath, so the
  change it confirmed could not be made;
- `fault.user_chose_payment`: the only wrong value of the write is the payment method, one the user was shown,
  and the user chose it in its own words (named it, or its kind when the user holds only one of that kind): the
  instruction's choice was never given;
- `fault.user_asked`: the write is an act the gold solution never makes, the user asked for it, and the hidden
  instruction never speaks of such an act;
- `fault.gold_against_policy`: the gold solution disagrees with the policy (`castdata.label.policy_rules`): the
  agent declined a gold cancellation the policy forbids, or it made, on the user's request and yes, a cancellation
  the policy allows and the gold solution never makes;
- `fault.gold_unreachable`: the agent's write used a value it was shown where the gold write of the same tool
  needs one that nothing could show (the instruction, the conversation, the database hold none).
"""

from __future__ import annotations

import functools
import json
import re

from castdata.envs import Domain
from castdata.envs.database import plain
from castdata.envs.reproduce import replay_record
from castdata.label.acts import topic_words
from castdata.label.attribution import proposal_of, refusal, string_values
from castdata.label.findings import Finding
from castdata.label.policy_rules import cancellation
from castdata.label.rules import is_confirmation
from castdata.label.visible import said_by_user
from castdata.messages import first_call
from castdata.records import Action, Trajectory

STOP = "###STOP###"
_PAYMENT_KEYS = ("payment_method_id", "payment_id", "payment_methods")
_PAYMENT_WORDS = {
    "gift_card": ("gift card", "gift-card", "giftcard"),
    "credit_card": ("credit card", "card ending", "visa", "mastercard", "amex", "credit", "card"),
    "paypal": ("paypal",),
    "certificate": ("certificate",),
}


@functools.cache
def _database_text(domain: Domain) -> str:
    tables = domain.base.tables
    return "\n".join(json.dumps(plain(table.load(key))) for table in tables.values() for key in table.blobs)


def gold_unreachable(trajectory: Trajectory, domain: Domain, critical: list[Finding]) -> bool:
    """Whether a wrong write got a value right the only way it could: the gold write of the same tool needs, for
    that argument, a value neither the instruction, the conversation nor the database holds, while the agent's
    value was shown to it."""
    messages = trajectory.messages
    seen = "\n".join(
        [trajectory.privileged.instruction, domain.policy] + [json.dumps(m.get("content")) for m in messages]
    )
    for finding in critical:
        call = first_call(messages[finding.step])
        gold = finding.expected
        if call is None or gold is None or gold.name != call.name:
            continue
        agent = call.arguments
        for key, value in gold.kwargs.items():
            if agent.get(key) == value:
                continue
            hidden = [v for v in string_values(value) if v not in seen and json.dumps(v) not in _database_text(domain)]
            shown = all(v in seen for v in string_values(agent.get(key)))
            if hidden and shown:
                return True
    return False


def _payment_kind(value: str) -> str | None:
    return next((kind for kind in _PAYMENT_WORDS if value.startswith(kind)), None)


def _user_chose_payment(trajectory: Trajectory, step: int, action: Action, expected: Action | None) -> bool:
    if expected is None or expected.name != action.name:
        return False
    differing = [key for key in action.kwargs if expected.kwargs.get(key) != action.kwargs[key]]
    if not differing or any(key not in _PAYMENT_KEYS for key in differing):
        return False
    chosen = [text for key in differing for text in string_values(action.kwargs[key])]
    shown = "\n".join(m.get("content") or "" for m in trajectory.messages[:step] if m["role"] in ("user", "tool"))
    if any(text not in shown for text in chosen):
        return False  # a payment the agent guessed is its own error
    user = said_by_user(trajectory.messages, step).lower()
    for text in chosen:
        kind = _payment_kind(text)
        if text in user or text.split("_")[-1] in user:
            continue  # the user named this very payment method
        others = set(re.findall(rf"\b{kind}_\d+", shown)) - {text} if kind else {text}
        if kind is None or others or not any(word in user for word in _PAYMENT_WORDS[kind]):
            return False  # the user named no payment of this kind, or one of several the user holds
    return True


def _user_asked(trajectory: Trajectory, step: int, action: Action, expected: Action | None) -> bool:
    if expected is not None and expected.name == action.name:
        return False
    words = topic_words(action.name)
    instruction = trajectory.privileged.instruction.lower()
    if not words or any(word in instruction for word in words):
        return False
    last_user = next((m for m in reversed(trajectory.messages[:step]) if m["role"] == "user"), None)
    asked = [m for m in trajectory.messages[1:step] if m["role"] == "user"]
    return last_user is not None and any(word in (m["content"] or "").lower() for m in asked for word in words)


def gold_against_policy(trajectory: Trajectory, domain: Domain, critical: list[Finding]) -> bool:
    """Whether the failure is the gold solution's disagreement with the policy: the agent declined a gold
    cancellation the policy forbids, or the only wrong write is a cancellation the policy allows, asked for and confirmed,
    that the gold solution never makes."""
    gold = list(trajectory.privileged.gold_actions)
    wrote_wrong = any(f.signal == "replay.write_off_gold" for f in critical)
    for finding in [] if wrote_wrong else critical:
        missing = finding.missing or finding.expected
        if (
            finding.signal == "replay.gold_write_missing"
            and missing is not None
            and missing.name == "cancel_reservation"
        ):
            before = domain.replay(domain.tool_actions(gold[: gold.index(missing)] if missing in gold else [])).db
            verdict = cancellation(
                domain, before, missing.kwargs.get("reservation_id", ""), said_by_user(trajectory.messages)
            )
            if verdict == "forbidden" and refusal(trajectory.messages, finding.step, missing) is not None:
                return True  # the agent declined, as the policy requires
    if len(critical) != 1 or critical[0].signal != "replay.write_off_gold" or critical[0].expected is not None:
        return False
    call = first_call(trajectory.messages[critical[0].step])
    if call is None or call.name != "cancel_reservation":
        return False
    step = critical[0].step
    db = replay_record(domain, trajectory, step).db
    said = said_by_user(trajectory.messages, step)
    allowed = cancellation(domain, db, call.arguments.get("reservation_id", ""), said) == "allowed"
    return allowed and "cancel" in said.lower() and proposal_of(trajectory.messages, step) is not None


def episode_fault(trajectory: Trajectory, domain: Domain, critical: list[Finding]) -> str | None:
    """Why a failed episode is the user's or the task's fault (a `fault.*` signal), or None when an agent
    action is to blame."""
    messages = trajectory.messages
    last_user = next((m["content"] or "" for m in reversed(messages) if m["role"] == "user"), "")
    if (
        STOP in last_user
        and is_confirmation(last_user.replace(STOP, ""))
        and messages[-1]["role"] == "user"
        and all(f.signal == "replay.gold_write_missing" for f in critical)
    ):
        return "fault.user_stopped"
    if gold_unreachable(trajectory, domain, critical):
        return "fault.gold_unreachable"
    if gold_against_policy(trajectory, domain, critical):
        return "fault.gold_against_policy"
    if len(critical) != 1 or critical[0].signal not in ("replay.write_off_gold", "replay.write_missed_gold"):
        return None  # the user's choice explains one wrong write, not several
    first = critical[0]
    call = first_call(messages[first.step])
    if call is None:
        return None
    action = call.action
    if _user_chose_payment(trajectory, first.step, action, first.expected):
        return "fault.user_chose_payment"
    if _user_asked(trajectory, first.step, action, first.expected):
        return "fault.user_asked"
    return None
