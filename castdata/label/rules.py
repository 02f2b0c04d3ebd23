"""Policy rule checks: per-action violations any episode can have, whatever its outcome (severity minor).

- `rule.no_confirmation`: a write whose latest user turn is not an explicit yes (paraphrased consent counts:
  "sure, go ahead with both", "fine, do it", "please cancel it"), or a second write on one yes that the
  confirmation request did not list (one yes covers the set of actions the request listed; a retry after a write
  that failed is no second write; a yes stays given through one question for a detail, such as the cancellation
  reason, that the user then gives without taking it back; "I'm not sure" is no "sure");
- `rule.unconfirmed_details`: a confirmed write on another record (order, reservation) than the request named,
  where it named one of the same shape (the user said yes to another record);
- `rule.before_auth`: a tool call that reads or writes data before an authentication tool succeeded
  (`calculate` and `think` touch no data); a domain whose policy has no authentication step (airline: the agent
  only obtains the user id) has no such rule;
- `rule.multiple_tool_calls`, `rule.tool_call_with_text`: the protocol violations the episode loop recorded;
- `rule.malformed_tool_call`, `rule.unknown_tool`, `rule.empty_reply`: unusable turns;
- `rule.unneeded_transfer`: a transfer to a human when the gold solution has none (the task did not need one),
  unless the user asked for a human after the agent had refused their request (the policy then allows it);
- `rule.misread_value`: an agent message, right after a tool result, that gives a field of that result (its
  amount, price, balance) a number the result does not hold for it (nor as its total), and no earlier tool result
  holds (then it is another record's);
- `rule.repeated_read`: a read with the very arguments of one that succeeded since the latest user turn and the
  agent's latest write: its result holds nothing the agent had not seen, and nobody asked anything new (a record
  read again after a change, or for a new user turn, is no repeat; in dual control the user's own tool calls come
  with a user turn);
- `rule.cancel_not_allowed`: a cancellation the policy forbids for that record (`castdata.label.policy_rules`:
  airline's flown trips, and economy bookings older than 24 hours without a covered reason);
- `rule.change_not_allowed`: a flight change the policy forbids (`castdata.label.policy_rules`: a basic economy
  reservation's flights, or another origin, destination or trip type);
- `rule.bags_miscounted`: checked bags added or booked with another count of paid bags than the policy's
  allowance gives (airline's free bags by membership and cabin);
- `rule.swap_not_allowed`: an item change or exchange whose new items are not one per item, each of the same
  product (retail's policy; `castdata.label.policy_rules`);
- `rule.unasked_compensation`: a certificate sent though no user turn before it asked for compensation (airline's
  policy: never offered proactively);
- `rule.payment_unasked`: a write that pays or refunds with a payment method nobody put to the user: the user never
  named it (its id, its number, its kind in words), and no agent message named it that the user said yes to, or
  answered without naming a method of its own (the policies: the user provides the payment method; airline's "the
  agent should ask for the payment or refund method");
- `rule.ungrounded_id`: a tool call with an identifier argument (order, item, user, product, reservation, payment
  id), or an agent message naming a record id (an order id, a long item or product number, a payment method id),
  that no user turn, tool result or the policy showed before: the agent guessed it (its own earlier messages are
  no source).
"""

from __future__ import annotations

import json
import re

from castdata.envs import RESPOND, Domain
from castdata.envs.reproduce import replay_record
from castdata.label.acts import signature, topic_words
from castdata.label.findings import Finding
from castdata.label.payments import names_a_method, names_payment, payment_ids
from castdata.label.policy_rules import cabin_set, cancellation, compensation, forbidden_write, item_swap
from castdata.messages import call_failed, first_call, tool_turns
from castdata.records import Action, Trajectory
from castdata.visible import identifiers, said_by_user

NO_DATA_TOOLS = frozenset({"calculate", "think"})
_YES = re.compile(  # "I'll go ahead and prepare the items" speaks of the user's own doing, and is no yes; "could
    # you confirm the change?" asks the agent to
    r"\b(yes|ye|yep|yeah|yup|(?<!you )confirm|confirmed|(?<!i'll )(?<!i\u2019ll )(?<!i will )go ahead|proceed|please do|do it|"
    r"do that|do both|let's do|i agree|agreed)\b",
    re.I,
)
# consent that is a yes only as the answer to a request to confirm ("Sure, my user id is ..." answers a question)
_SOFT_YES = re.compile(
    r"\b((?<!not )(?<!n't )(?<!n\u2019t )sure|ok|okay|fine|alright|all right|sounds good|sounds great|that works|"
    r"works for me|correct|absolutely|"
    r"of course|that's right|perfect|looks? (?:good|great|right|correct|fine)|"
    # the act asked for in so many words ("No longer needed. Please cancel it.")
    r"please (?:cancel|return|exchange|modify|change|update|book|process|upgrade) (?:it|them|both|that|those|the|my))\b",
    re.I,
)
ASKS_TO_CONFIRM = re.compile(
    r"confirm|proceed|go ahead|would you like me to|shall i|should i|do you want me to|yes/no|is that correct|"
    r"is this correct|are you sure|okay to",
    re.I,
)
_NO = re.compile(  # "No longer needed. Yes, cancel it" gives a reason, then a yes
    r"^\W*(no(?!\s+(?:longer|problem|worries)\b)|nope|don't|do not|not|wait|hold on|actually)\b", re.I
)
_NAMED_RECORD_KEYS = ("order_id", "reservation_id")  # what a confirmation request must name: the record a write changes

_VIOLATIONS = {
    "multiple_tool_calls": "policy_violation",
    "tool_call_with_text": "policy_violation",
    "malformed_tool_call": "schema_error",
    "unknown_tool": "schema_error",
    "empty_reply": "miscommunication",
}


def is_confirmation(text: str, request: str | None = None) -> bool:
    """Whether a user message is an explicit yes: a yes word, or paraphrased consent ("fine, do it", "sure") given
    to a `request` that asked to confirm (without the request, only a yes word counts)."""
    if _NO.match(text):
        return False
    return bool(_YES.search(text)) or (
        request is not None and bool(ASKS_TO_CONFIRM.search(request)) and bool(_SOFT_YES.search(text))
    )


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
    """Whether a write changes another record (order, reservation) than the confirmed request named, where the
    request named one of the same shape. Other details (the items replaced, unchanged flights) need not be listed."""
    listed = {token.lstrip("#") for token in identifiers(request)} | set(re.findall(r"\b[A-Z0-9]{6}\b", request))
    shapes = {_shape(token) for token in listed}
    return any(token not in listed and _shape(token) in shapes for token in _targets(action))


def _targets(action: Action) -> list[str]:
    return [
        str(action.kwargs[key]).lstrip("#") for key in _NAMED_RECORD_KEYS if isinstance(action.kwargs.get(key), str)
    ]


def covered(action: Action, request: str, first: Action) -> bool:
    """Whether a confirmation request listed a write made after `first` on the same yes: it speaks of the write's
    act and names its record, or acts on the record `first` changed and the request names its act in words
    `first`'s act does not have ("bags" besides a cabin change); otherwise a write on that record needs a detail
    `first` did not have (a second identical write is never covered)."""
    if not any(word in request.lower() for word in topic_words(action.name)):
        return False
    values = [v.lstrip("#") for v in re.findall(r'"([^"]{3,})"', json.dumps(action.kwargs))]
    targets = _targets(action)
    if targets and targets != _targets(first):
        return all(target in request for target in targets)
    own = set(topic_words(action.name)) - set(topic_words(first.name))
    if targets and action.name != first.name and any(word in request.lower() for word in own):
        return True  # another act the request listed in its own words, on the record the first write changed
    before = {v.lstrip("#") for v in re.findall(r'"([^"]{3,})"', json.dumps(first.kwargs))}
    return any(value in request for value in values if value not in targets and value not in before)


_ID_KEYS = (
    "order_id",
    "item_ids",
    "new_item_ids",
    "item_id",
    "user_id",
    "product_id",
    "reservation_id",
    "payment_method_id",
    "payment_id",
)


def _id_values(kwargs: dict) -> list[str]:
    """The identifier arguments of a tool call (order, item, user, product, reservation, payment ids), as strings."""
    found = []
    for key, value in kwargs.items():
        if key in _ID_KEYS:
            found += [str(v) for v in (value if isinstance(value, list) else [value]) if isinstance(v, (str, int))]
    return found


def ungrounded_ids(action: Action, seen: str) -> list[str]:
    """The identifier arguments of `action` that `seen` (what the user and the tools showed) never held as a token of
    its own: part of an email address ("yara_garcia_1905" of "yara_garcia_1905@gmail.com") was never shown as an id."""
    return [value for value in _id_values(action.kwargs) if not _shown_as_id(value, seen)]


def _shown_as_id(value: str, seen: str) -> bool:
    """Whether `seen` holds `value` (a leading "#" optional) with no word, address or id character on either side."""
    bare = value.lstrip("#")
    start = seen.find(bare)
    while start != -1:
        before = start - 1 if start and seen[start - 1] != "#" else start - 2
        end = start + len(bare)
        if (before < 0 or not _joins(seen[before], "_.@+-")) and (end >= len(seen) or not _joins(seen[end], "_@")):
            return True
        start = seen.find(bare, start + 1)
    return False


def _joins(char: str, also: str) -> bool:
    return char.isalnum() or char in also


_RECORD_ID = re.compile(r"#W\d{5,}|\b[a-z]+_[a-z_]*\d{4,}\b|(?<![\w.$,-])\d{8,}(?![\w.,-])")


def guessed_ids(text: str, seen: str) -> list[str]:
    """The record identifiers an agent message names (order ids, item and product numbers, payment method ids)
    that nothing the user or the tools showed holds: a message that offers to act on them guessed them."""
    return [token for token in _RECORD_ID.findall(text) if token not in seen and token.lstrip("#") not in seen]


def _numbers_by_key(value: object, found: dict[str, list[float]]) -> dict[str, list[float]]:
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                found.setdefault(key.lower(), []).append(float(item))
            else:
                _numbers_by_key(item, found)
    elif isinstance(value, list):
        for item in value:
            _numbers_by_key(item, found)
    return found


def misread_values(text: str, result: str, earlier: str = "") -> list[str]:
    """The numbers an agent message gives for a field of the tool result it just read ("the amount is 59.67")
    that the result does not hold for that field, nor as the field's total, and that no `earlier` tool result
    holds: a price from an earlier lookup is of another record, not misread."""
    try:
        numbers = _numbers_by_key(json.loads(result), {})
    except ValueError:
        return []
    shown = {float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", earlier)} if earlier else set()
    wrong = []
    for key, values in numbers.items():
        name = re.escape(key.replace("_", " "))
        for found in re.finditer(
            rf"\b{name}\b(?:\s*(?:on record|is|was|of|:|=))+\s*\$?(\d[\d,]*(?:\.\d+)?)", text, re.I
        ):
            said = float(found.group(1).replace(",", ""))
            if all(abs(said - value) > 0.005 for value in [*values, sum(values)]) and said not in shown:
                wrong.append(found.group(1))
    return wrong


_HUMAN = re.compile(r"\b(human|real person|representative|supervisor|manager|transfer|someone else)\b", re.I)
_REFUSED = re.compile(
    r"\b(can ?not|can't|cannot|unable|not able|not possible|not allowed|not eligible|unfortunately)\b", re.I
)


def _asked_for_human_after_refusal(messages: list[dict], step: int) -> bool:
    """Whether the user's latest turn before `step` asks for a human, after an agent message that refused."""
    last_user = next((i for i in range(step - 1, 0, -1) if messages[i]["role"] == "user"), None)
    if last_user is None or not _HUMAN.search(messages[last_user].get("content") or ""):
        return False
    return any(
        messages[i]["role"] == "assistant" and _REFUSED.search(messages[i].get("content") or "")
        for i in range(1, last_user)
    )


def _cancellation_forbidden(trajectory: Trajectory, domain: Domain, step: int, action: Action) -> bool:
    """Whether `action` cancels a record the policy forbids cancelling, in the state the episode had reached."""
    record = action.kwargs.get("reservation_id")
    if action.name != "cancel_reservation" or not isinstance(record, str):
        return False
    db = replay_record(domain, trajectory, step).db
    return cancellation(domain, db, record, said_by_user(trajectory.messages, step)) == "forbidden"


def write_forbidden(trajectory: Trajectory, domain: Domain, step: int, action: Action) -> bool:
    """Whether the policy forbids a flight change or a bag count whatever the user says, in the state the episode
    had reached (with the cabin the agent's latest flight change of the reservation set)."""
    if action.name not in ("update_reservation_flights", "update_reservation_baggages", "book_reservation"):
        return False
    made = [
        call.action
        for earlier, call in tool_turns(trajectory.messages)
        if earlier < step and not call_failed(trajectory.messages, earlier)
    ]
    db = replay_record(domain, trajectory, step).db
    return forbidden_write(domain, db, action, cabin_set(made, action.kwargs.get("reservation_id")))


def _swap_forbidden(domain: Domain, action: Action) -> bool:
    """Whether `action` swaps items for new ones the policy does not allow (another product, a count that differs)."""
    old, new = action.kwargs.get("item_ids"), action.kwargs.get("new_item_ids")
    if not isinstance(old, list) or not isinstance(new, list):
        return False
    return item_swap(domain, [str(i) for i in old], [str(i) for i in new]) == "forbidden"


def rule_findings(trajectory: Trajectory, domain: Domain) -> list[Finding]:
    """Every policy rule violation of an episode, in step order."""
    findings: list[Finding] = []
    authenticated = False
    confirmed = False  # the latest user turn is a yes
    first_write = None  # the first write made on the latest yes: one yes covers the writes its request listed
    said, request = "", ""  # the agent's latest message, and the one the latest user turn answered
    gold_transfers = any(domain.tool_kind(a.name) == "transfer" for a in trajectory.privileged.gold_actions)
    messages = trajectory.messages
    seen = messages[0].get("content") or ""  # what the user and the tools have shown so far (and the policy)
    reads: set[str] = set()  # the signatures of the successful reads since the latest user turn and write
    results: list[str] = []  # the tool results so far
    agreed = ""  # the confirmation requests the user said yes to, and what the user said
    detail = ""  # the latest user turn, when it answers a question for a detail right after a yes
    for step, message in enumerate(messages):
        if message["role"] == "tool":
            seen += "\n" + (message.get("content") or "")
            results.append(message.get("content") or "")
            continue
        if message["role"] == "user":
            seen += "\n" + (message.get("content") or "")
            reads.clear()
            answer = message.get("content") or ""
            # a yes stays given through one question for a detail the user then gives without taking it back ("yes,
            # cancel it" / "the reason, please?" / "no longer needed"): `detail` holds it until the write names it
            detail = answer if confirmed and not _NO.match(answer) and ASKS_TO_CONFIRM.search(said) else ""
            confirmed, request = is_confirmation(answer, said), said
            # a request the user said yes to, or a message that told the user how a change pays and got no other
            # method in answer ("the refund goes to your Mastercard ending 2478"), put its payment method to the user
            told = confirmed or not names_a_method(answer)
            agreed += "\n" + answer + ("\n" + said if told else "")
            first_write = None
            continue
        if message["role"] != "assistant":
            continue
        violation = trajectory.meta[step].violation
        call = first_call(message)
        action = call.action if call is not None else None
        if violation in _VIOLATIONS:
            expected = action if violation in ("multiple_tool_calls", "tool_call_with_text") else None
            findings.append(Finding(step, f"rule.{violation}", _VIOLATIONS[violation], "minor", expected))
        if action is None:
            said = message.get("content") or ""
            if guessed_ids(said, seen):
                findings.append(Finding(step, "rule.ungrounded_id", "ungrounded_claim", "minor"))
            if messages[step - 1]["role"] == "tool" and misread_values(said, results[-1], "\n".join(results[:-1])):
                findings.append(Finding(step, "rule.misread_value", "misread_observation", "minor"))
            continue
        kind = domain.tool_kind(action.name)
        if kind in ("read", "write") and ungrounded_ids(action, seen):
            findings.append(Finding(step, "rule.ungrounded_id", "ungrounded_claim", "minor"))
        ok = step + 1 < len(messages) and not str(messages[step + 1].get("content") or "").startswith("Error")
        if kind == "read" and violation != "malformed_tool_call":
            if signature(action) in reads:
                findings.append(Finding(step, "rule.repeated_read", "redundant_action", "minor"))
            if ok:
                reads.add(signature(action))
        elif kind == "write":
            reads.clear()
        needs_auth = bool(domain.catalog.auth_tools) and not authenticated
        if kind in ("read", "write") and needs_auth and action.name not in domain.catalog.auth_tools | NO_DATA_TOOLS:
            findings.append(Finding(step, "rule.before_auth", "auth_violation", "minor", ask_to_authenticate(domain)))
        if kind == "write":
            supplied = bool(detail) and any(
                len(v) >= 3 and v.lower() in detail.lower() for v in action.kwargs.values() if isinstance(v, str)
            )
            if not (confirmed or supplied) or (first_write is not None and not covered(action, request, first_write)):
                findings.append(
                    Finding(step, "rule.no_confirmation", "missing_confirmation", "minor", ask_to_confirm(action))
                )
            elif deviates(action, request):
                findings.append(Finding(step, "rule.unconfirmed_details", "wrong_argument", "minor"))
            if ok:  # a write that failed used up no yes: its retry carries on the act the user confirmed
                first_write = first_write or action
            if any(not names_payment(agreed, payment) for payment in payment_ids(action)):
                findings.append(Finding(step, "rule.payment_unasked", "policy_violation", "minor"))
        if kind == "write" and _cancellation_forbidden(trajectory, domain, step, action):
            findings.append(Finding(step, "rule.cancel_not_allowed", "policy_violation", "minor"))
        if kind == "write" and write_forbidden(trajectory, domain, step, action):
            signal = (
                "rule.change_not_allowed" if action.name == "update_reservation_flights" else "rule.bags_miscounted"
            )
            findings.append(Finding(step, signal, "policy_violation", "minor"))
        if kind == "write" and _swap_forbidden(domain, action):
            findings.append(Finding(step, "rule.swap_not_allowed", "policy_violation", "minor"))
        if action.name == "send_certificate" and compensation(domain, said_by_user(messages, step)) == "forbidden":
            findings.append(Finding(step, "rule.unasked_compensation", "policy_violation", "minor"))
        if kind == "transfer" and not gold_transfers and not _asked_for_human_after_refusal(messages, step):
            findings.append(Finding(step, "rule.unneeded_transfer", "unnecessary_transfer", "minor"))
        authenticated = authenticated or (ok and action.name in domain.catalog.auth_tools)
    return findings
