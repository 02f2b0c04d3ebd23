"""Programmatic rationales: each hindsight judgement written up as a label with a grounded, structured rationale.

Filled from the findings only: evidence points to earlier messages with exact quotes (the user's latest
turn; for a wrong value, the latest message that showed the right one), policy refs cite the clause each
rule rests on, and the expected action is kept only when everything in it was visible before the action.
These are also the fallback when a teacher model's rationale fails verification (`castdata.label.writers`).
"""

from __future__ import annotations

import json
from typing import Any

from castdata.envs import RESPOND, load_domain
from castdata.label.findings import Finding
from castdata.label.hindsight import EpisodeJudgement, Judgement
from castdata.label.policy import ClauseTable, clause_table
from castdata.label.schema import Evidence, Label, LabelSource, PolicyRef, Rationale
from castdata.records import Action
from castdata.visible import MIN_QUOTE, View

QUOTE_LIMIT = 160

_TOPICS = {
    "rule.no_confirmation": "confirmation",
    "rule.unconfirmed_details": "confirmation",
    "replay.output_unconfirmed": "confirmation",
    "rule.before_auth": "authentication",
    "rule.multiple_tool_calls": "one_tool_call",
    "rule.tool_call_with_text": "one_tool_call",
    "rule.unneeded_transfer": "transfer",
    "replay.hand_off_needed": "transfer",
    "rule.cancel_not_allowed": "cancellation",
    "rule.change_not_allowed": "flight_change",
    "rule.bags_miscounted": "checked_bags",
    "rule.unasked_compensation": "compensation",
    "rule.payment_unasked": "payment",
    "rule.swap_not_allowed": "item_swap",
}

_WRONG_WRITE = "The write had to make exactly the change the user asked for and confirmed{fix}."
_REQUIRED = {
    "replay.write_off_gold": _WRONG_WRITE,
    "replay.write_missed_gold": _WRONG_WRITE,
    "replay.gold_write_missing": "Before ending, every change the user asked for had to be made, after listing its details and getting an explicit yes.",
    "replay.output_missing": "Before ending, the agent had to tell the user the information their request asked for.",
    "replay.output_unconfirmed": "A confirmation request lists what the write gives the user back too (here what they asked to know).",
    "replay.blocked_later_write": "Writes must come in an order that keeps every requested change possible{fix}.",
    "replay.out_of_order": "Changes must be made in the order that gives the result the user asked for{fix}.",
    "replay.hand_off_needed": "A request the policy does not let the agent serve is handed to a human agent, not pursued.",
    "replay.step_limit_loop": "A lookup is made again only when something may have changed since its result; the agent answers the user instead of repeating it.",
    "replay.extra_tool_attempt": "A change is made with the write tool the policy gives for it{fix}; a result that shows nothing changed is no change made.",
    "said.proposal": "What the agent offers or asks the user to confirm must be the change the policy allows and the conversation established{fix}.",
    "said.refusal": "A request the policy allows must be handled, not refused.",
    "said.answer": "An answer to the user must state the value the tool results show.",
    "said.catalogue": "What the agent tells the user about a product's variants must be what the tool results show; a lookup that lists some variants does not show that no other exists.",
    "rule.no_confirmation": "Before a write, the agent must list the action details and get an explicit yes in the user's latest message.",
    "rule.unconfirmed_details": "A write must use the details the user confirmed.",
    "rule.before_auth": "The user must be authenticated ({auth_tools}) before any data access or change.",
    "rule.multiple_tool_calls": "At most one tool call per turn, and no message to the user in the same turn.",
    "rule.tool_call_with_text": "At most one tool call per turn, and no message to the user in the same turn.",
    "rule.malformed_tool_call": "A tool call must give its arguments as a JSON object.",
    "rule.unknown_tool": "A tool call must name one of the available tools.",
    "rule.empty_reply": "Every reply must call a tool or say something to the user.",
    "rule.unneeded_transfer": "Transfer to a human only when the request cannot be handled with the agent's own tools.",
    "rule.cancel_not_allowed": "A reservation may be cancelled only as the policy allows: an unflown trip, within 24 hours of booking, a flight the airline cancelled, business class, or insurance with a covered reason.",
    "rule.change_not_allowed": "Basic economy flights cannot be modified; other reservations keep their origin, destination and trip type.",
    "rule.bags_miscounted": "Each passenger's free checked bags follow the booking user's membership and the cabin; only the extra bags are paid.",
    "rule.ungrounded_id": "An identifier passed to a tool must come from the user or an earlier tool result, never a guess.",
    "rule.misread_value": "What the agent tells the user must be what the tool result says.",
    "rule.repeated_read": "A lookup is made again only when something may have changed since its result.",
    "rule.unasked_compensation": "Compensation is never offered proactively: only after the user complains and explicitly asks for it.",
    "rule.payment_unasked": "The user provides the payment method a change pays or refunds with; the agent asks for it rather than choosing.",
    "rule.swap_not_allowed": "Each item can only be swapped for one available new item of the same product with another option.",
}
_ASSESSMENT = {
    "wrong_argument": "its arguments are not the ones the conversation established, so it does not make the change the user asked for",
    "wrong_tool": "it is not the tool for the change the user asked for",
    "premature_termination": "the agent ended the conversation while a change the user asked for was still not made",
    "unnecessary_transfer": "the agent handed the user to a human although its own tools could handle the request",
    "missed_required_action": "a change the user asked for was never made",
    "replay.output_missing": "the conversation ended without the information the user asked for",
    "replay.output_unconfirmed": "it was made without asking the user to confirm, and the details that request had to list (what the user asked to know) were never said",
    "replay.blocked_later_write": "it changes the record in a way that makes a later requested change impossible",
    "replay.out_of_order": "it comes before a change that had to be made first, so the changes end in another state",
    "replay.hand_off_needed": "it pursues a request the policy leaves to a human agent instead of transferring the user",
    "replay.step_limit_loop": "it repeats an earlier call, and the agent goes on repeating calls without a word to the user until the step limit ends the conversation",
    "said.proposal": "the user's yes to this message led to a change that is not the one the request and the policy call for",
    "said.refusal": "it refuses a change the policy allows, and the change is never made",
    "said.answer": "it does not give the value the user asked for",
    "said.catalogue": "it tells the user which variants are available, which the lookups it had seen do not show",
    "rule.no_confirmation": "the user's latest message is not an explicit yes to this change",
    "rule.unconfirmed_details": "the user confirmed other details than the ones used",
    "rule.before_auth": "no authentication had succeeded yet",
    "rule.multiple_tool_calls": "the turn held several tool calls (only the first was executed)",
    "rule.tool_call_with_text": "the turn held a tool call together with a message to the user",
    "rule.malformed_tool_call": "its arguments were not a JSON object",
    "rule.unknown_tool": "no such tool exists",
    "rule.empty_reply": "the reply was empty",
    "rule.cancel_not_allowed": "the policy does not allow cancelling this reservation",
    "rule.change_not_allowed": "the policy does not allow this flight change",
    "rule.bags_miscounted": "its paid bags are not the ones the allowance leaves to pay",
    "rule.ungrounded_id": "it passes an identifier that nothing the user said or a tool returned showed",
    "rule.misread_value": "it gives the user a value the tool result it just read does not hold",
    "rule.repeated_read": "it repeats an earlier lookup with the same arguments, and nothing changed since its result",
    "rule.unasked_compensation": "it sends compensation the user never asked for",
    "rule.payment_unasked": "it pays or refunds with a payment method the user never named or agreed to",
    "rule.swap_not_allowed": "its new items are not one per item of the same product",
}
_VALID_ASSESSMENT = {
    "write": "Valid: the change rests on the user's explicit yes to the details it uses, as the policy requires.",
    "read": "Valid: the lookup uses details the user or an earlier tool result gave, and moves the request forward.",
    "respond": "Valid: the message answers the user's latest turn from what the conversation shows.",
    "transfer": "Valid: the hand-off follows the user's request, as the policy allows.",
}
_NOT_JUDGED = {
    "outcome.after_first_error": "Not judged on its own: it follows an earlier critical error in this conversation.",
    "outcome.unexplained_failure": "Uncertain: no check settles whether this action is right.",
}


def _excerpt(text: str) -> str:
    """The start of a text, cut at a word boundary: an exact substring fit to quote."""
    if len(text) <= QUOTE_LIMIT:
        return text
    cut = text.rfind(" ", 0, QUOTE_LIMIT)
    return text[: cut if cut > 0 else QUOTE_LIMIT]


def _ordered(judgement: Judgement) -> list[Finding]:
    return sorted(judgement.findings, key=lambda f: not f.critical)


def _describe(action: Action) -> str:
    if action.name == RESPOND:
        return f'The agent told the user: "{_excerpt(action.kwargs.get("content", ""))}"'
    return f"The agent called {action.name} with {json.dumps(action.kwargs)}."


def _changed_values(action: Action, expected: Action) -> dict[str, Any]:
    """The arguments of `expected` that `action` gets wrong."""
    return {key: value for key, value in expected.kwargs.items() if action.kwargs.get(key) != value}


def _values(value: Any) -> list[str]:
    if isinstance(value, list):
        return [text for item in value for text in _values(item)]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _values(item)]
    return [value if isinstance(value, str) else json.dumps(value)]


def _grounded_expected(judgement: Judgement, view: View) -> Action | None:
    for finding in _ordered(judgement):
        expected = finding.expected
        if expected is None or expected == judgement.action:
            continue
        if not view.ungrounded(json.dumps(expected.kwargs), judgement.step, also=judgement.step, strict=True):
            return expected
    return None


def _sources(action: Action, view: View, step: int) -> list[tuple[int, str]]:
    """Where the details a valid action uses came from: the latest user turn or tool result showing each."""
    found = []
    for text in dict.fromkeys(t for t in _values(action.kwargs) if len(t) >= 3 and action.name != RESPOND):
        seen = next(
            (i for i in range(step - 1, 0, -1) if view.roles[i] in ("user", "tool") and text in view.texts[i]), None
        )
        if seen is not None:
            found.append((seen, text))
    return found


def _correction(judgement: Judgement, expected: Action | None) -> tuple[Action, Action] | None:
    """(the wrong write, the right one): of a wrong proposal, or of a wrong tool call with a grounded correction."""
    proposal = next((f for f in judgement.findings if f.wrong is not None and f.missing is not None), None)
    if proposal is not None:
        return (proposal.wrong, proposal.missing) if expected is not None else None
    if expected is not None and expected.name != RESPOND:
        return judgement.action, expected
    return None


def _evidence(judgement: Judgement, expected: Action | None, view: View) -> list[Evidence]:
    step, found = judgement.step, []
    correction = _correction(judgement, expected)
    if correction is not None:
        action, right = correction
        for key, value in _changed_values(action, right).items():
            wrong = set(_values(action.kwargs.get(key)))
            for text in _values(value):
                seen = view.last_seen(text, step) if text and text not in wrong else None
                if seen is not None:
                    found.append((seen, text))
    if not judgement.findings:
        found += _sources(judgement.action, view, step)
    last_user = next((i for i in range(step - 1, 0, -1) if view.roles[i] == "user"), None)
    if last_user is not None and len(view.texts[last_user]) >= MIN_QUOTE:
        found.append((last_user, _excerpt(view.texts[last_user])))
    if any(f.signal == "said.catalogue" for f in judgement.findings):  # the lookup the claim rests on
        lookup = next((i for i in range(step - 1, 0, -1) if view.roles[i] == "tool"), None)
        if lookup is not None and view.texts[lookup]:
            found.append((lookup, _excerpt(view.texts[lookup])))
    if any(f.signal == "rule.unconfirmed_details" for f in judgement.findings) and last_user is not None:
        request = next((i for i in range(last_user - 1, 0, -1) if view.roles[i] == "assistant"), None)
        if request is not None and view.texts[request]:
            found.append((request, _excerpt(view.texts[request])))
    evidence = []
    for seen, quote in dict.fromkeys((seen, quote) for seen, quote in found if len(quote) >= MIN_QUOTE):
        source = "tool_result" if view.roles[seen] == "tool" else "message"
        evidence.append(Evidence(step=seen, source=source, quote=quote))
    return evidence


def _policy_refs(judgement: Judgement, clauses: ClauseTable) -> list[PolicyRef]:
    refs: dict[str, PolicyRef] = {}
    for finding in _ordered(judgement):
        topic = "transfer" if finding.category == "unnecessary_transfer" else _TOPICS.get(finding.signal)
        if topic is not None:
            hit = clauses.about(topic)
        elif finding.signal in (
            "replay.write_off_gold",
            "replay.write_missed_gold",
            "replay.gold_write_missing",
            "replay.blocked_later_write",
            "replay.out_of_order",
            "said.proposal",
        ):
            hit = clauses.for_tool((finding.missing or finding.expected or judgement.action).name)
        else:
            hit = None
        if hit is not None:
            clause, sentence = hit
            refs.setdefault(clause.clause_id, PolicyRef(clause_id=clause.clause_id, quote=sentence))
    return list(refs.values())


def _outcome_signal(episode: EpisodeJudgement, judgement: Judgement) -> str:
    if episode.success:
        return "outcome.success"
    if episode.fault is not None:
        return episode.fault
    if episode.first_error is None:
        return "outcome.unexplained_failure"
    return "outcome.after_first_error" if judgement.after_first_error else "outcome.before_first_error"


def _kind(action: Action, domain: str) -> str:
    if action.name == RESPOND:
        return "respond"
    kind = load_domain(domain).tool_kind(action.name)
    return kind if kind in _VALID_ASSESSMENT else "read"


def _valid_required(action: Action, evidence: list[Evidence], kind: str) -> str:
    """What a valid action rests on: the messages it draws its details from (the evidence points at them)."""
    basis = " (the evidence quotes where they came from)" if evidence else ""
    return {
        "write": f"A change needs the user's explicit yes to its listed details{basis}.",
        "read": f"A lookup must use details the user or an earlier tool result gave{basis}.",
        "respond": f"A message must rest on what the user said and the tools returned{basis}.",
        "transfer": f"A transfer must follow the user's request or a request the tools cannot handle{basis}.",
    }[kind]


def _prose(
    episode: EpisodeJudgement, judgement: Judgement, expected: Action | None, auth_tools: str, evidence: list[Evidence]
) -> Rationale:
    observed = _describe(judgement.action)
    if not judgement.findings:
        kind = _kind(judgement.action, episode.trajectory.domain)
        signal = _outcome_signal(episode, judgement)
        assessment = _NOT_JUDGED.get(signal, _VALID_ASSESSMENT[kind])
        return Rationale(
            observed=observed, required=_valid_required(judgement.action, evidence, kind), assessment=assessment
        )
    fix = ""
    correction = _correction(judgement, expected)
    if correction is not None and correction[0].name == correction[1].name:
        changes = ", ".join(f"{key} = {json.dumps(value)}" for key, value in _changed_values(*correction).items())
        fix = f" ({changes}, as established earlier in the conversation)" if changes else ""
    elif correction is not None:
        fix = f" (with {correction[1].name})"
    required, reasons = [], []
    if expected is None and any(f.expected is not None for f in judgement.findings):
        reasons.append("the corrected action cannot be stated from what the agent had seen")
    for finding in _ordered(judgement):
        required.append(_REQUIRED[finding.signal].format(fix=fix, auth_tools=auth_tools))
        reasons.append(_ASSESSMENT.get(finding.signal) or _ASSESSMENT[finding.category])
    assessment = f"Invalid ({judgement.severity}): {'; '.join(dict.fromkeys(reasons))}."
    return Rationale(observed=observed, required=" ".join(dict.fromkeys(required)), assessment=assessment)


def programmatic_label(
    episode: EpisodeJudgement, judgement: Judgement, view: View, clauses: ClauseTable, auth_tools: str
) -> Label:
    """The label of one judged action, with its programmatic rationale."""
    trajectory = episode.trajectory
    expected = _grounded_expected(judgement, view)
    signals = [f.signal for f in _ordered(judgement)] or [_outcome_signal(episode, judgement)]
    method = (
        "rule" if judgement.findings and all(f.signal.startswith("rule.") for f in judgement.findings) else "hindsight"
    )
    meta = trajectory.meta[judgement.step]
    evidence = _evidence(judgement, expected, view)
    return Label(
        trajectory_id=trajectory.id,
        domain=trajectory.domain,
        split=trajectory.split,
        task_id=trajectory.task_id,
        trial=trajectory.trial,
        step=judgement.step,
        action=judgement.action,
        verdict=judgement.verdict,
        severity=judgement.severity,
        categories=judgement.categories,
        policy_refs=_policy_refs(judgement, clauses),
        evidence=evidence,
        rationale=_prose(episode, judgement, expected, auth_tools, evidence),
        expected_action=expected,
        label_source=LabelSource(method=method, signals=signals),
        first_critical_error=judgement.first_critical_error,
        after_first_error=judgement.after_first_error,
        user_fault=episode.fault is not None,
        extra={"raw": meta.raw} if meta.violation and meta.raw is not None else {},
    )


def programmatic_labels(episode: EpisodeJudgement, view: View) -> list[Label]:
    """Labels for every judged action of an episode, grounded against `view` (the episode's `View`)."""
    name = episode.trajectory.domain
    auth_tools = " or ".join(sorted(load_domain(name).catalog.auth_tools))
    return [
        programmatic_label(episode, judgement, view, clause_table(name), auth_tools) for judgement in episode.judgements
    ]
