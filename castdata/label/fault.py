"""The simulated user's fault (or the task's): failed episodes where no agent action is to blame.

Checked, in hindsight, on the episode's first critical finding (privileged: the hidden instruction and the gold
solution are used for the verdict only, never in a rationale):

- `fault.user_stopped`: the user's last turn said yes and ended the conversation in the same breath, so the
  change it confirmed could not be made;
- `fault.user_chose_payment`: the only wrong value of the write is the payment method, one the user was shown,
  and the user chose it in its own words (named it, or its kind when the user holds only one of that kind; a card
  the user named by its last digits must have been shown with them): the instruction's choice was never given;
- `fault.user_chose_target`: the only wrong values of the write are the records it acts on (an order, a
  reservation), and the user named each first, unprompted or from a choice the agent offered with the gold record
  (and said yes to a message that speaks of the write's act: a yes to a reschedule excuses no cancellation);
- `fault.gold_payment_unspecified`: the only wrong value of the write is a payment method the agent named in the
  message the user said yes to, and the hidden instruction says nothing of paying;
- `fault.user_withheld_id`: a needed change never made, where the user said it has no user id though its
  instruction gives one, and never gave it (the policy requires it before any change);
- `fault.user_withheld_detail`: the only wrong values of the write are items the agent described in the message
  the user said yes to, each with an option the user asked for (its capacity, its size) and differing from the
  gold's item only in options the user never spoke of: what picks the gold's item was never said;
- `fault.user_left_out_items`: the only difference of the write from the gold write on its record is items left
  out, each of which the agent had named to the user, while the user named every item the write holds and none of
  the left-out ones (it chose to return three of four);
- `fault.user_chose_option`: the only wrong values of the write are words the user said after the agent set them
  out as a choice beside the gold's ("no longer needed" or "ordered by mistake"): the user picked the other;
- `fault.user_asked`: the write is an act the gold solution never makes, the user asked for it, and the hidden
  instruction never speaks of such an act; or it acts on a record (an order, a reservation) no gold action
  touches or names, which the user named first, asking for that act; or it changes a record the gold never
  writes, which the instruction wants changed only on a condition ("if available"), and the user asked for the
  act after the agent said the condition fails;
- `fault.user_never_asked`: a needed item change never made, where no user turn names its record or any of its
  items (by a word of the item's name, "camera", or a word inside one, "watch" in Wristwatch), though the agent
  read them, while the user named the items of the gold's other item changes one by one and never asked for
  "everything": the user never asked for it;
- `fault.user_refused_payment`: a needed change never made whose gold write pays with a kind of method (PayPal, a
  gift card) the user said it does not use or want, though its hidden instruction says nothing of that kind: the
  only way to pay was refused by the user;
- `fault.user_declined`: a needed change never made, on a record the agent offered the change for among several
  others, when the user's answer chose others only and never asked for it after; or one the agent set out itself
  (its record or items, its act, the new items it sets) and asked to go ahead with, when the user's answer was no
  yes and asked for no such act, or put it off ("I'll handle it later"), and no later user turn asked for it;
- `fault.gold_against_policy`: the gold solution disagrees with the policy (`castdata.label.policy_rules`): a
  gold write the policy forbids whatever the user says (a cancellation of a flown trip, a flight change to another
  destination, bags charged that the allowance makes free), when the agent made no such forbidden write itself;
  or the agent declined a gold cancellation the policy forbids for the user's reason, or it made, on the user's
  request and yes, a cancellation the policy allows and the gold solution never makes, or the gold solution sends
  compensation the user never asked for in a conversation the user ended (the policy forbids offering it unasked;
  an agent's transfer that cut the conversation short is the agent's);
- `fault.gold_unreachable`: a wrong write used a value it was shown where the gold write of the same tool needs one
  that nothing could show (the instruction, the conversation, the database hold none): no agent could have won
  the episode, whatever else it did.
"""

from __future__ import annotations

import functools
import json
import re

from castdata.envs import Domain
from castdata.envs.database import plain
from castdata.envs.reproduce import replay_record
from castdata.label.acts import TARGET_KEYS, record_ids, specific_words, topic_words
from castdata.label.attribution import (
    REFUSAL,
    agent_text,
    describes,
    descriptions,
    item_names,
    mentions,
    new_item_ids,
    numbers_in,
    proposal_of,
    refusal,
    sentences,
    shown_records,
    string_values,
    targets,
)
from castdata.label.findings import Finding
from castdata.label.payments import PAYMENT_KEYS, PAYMENT_WORDS, payment_ids, payment_kind
from castdata.label.policy_rules import cancellation, compensation, forbidden_gold_write, forbidden_writes
from castdata.label.replay import shown_among
from castdata.label.rules import ASKS_TO_CONFIRM, is_confirmation
from castdata.messages import first_call, tool_turns
from castdata.records import Action, Trajectory
from castdata.visible import said_by_user

STOP = "###STOP###"


@functools.cache
def _database_text(domain: Domain) -> str:
    tables = domain.base.tables
    return "\n".join(json.dumps(plain(table.load(key))) for table in tables.values() for key in table.blobs)


@functools.cache
def _user_ids(domain: Domain) -> frozenset[str]:
    users = domain.base.tables.get("users")
    return frozenset(users.blobs) if users is not None else frozenset()


def gold_unreachable(trajectory: Trajectory, domain: Domain, critical: list[Finding]) -> bool:
    """Whether no agent could have matched the gold solution: a wrong write used a value it was shown where the gold
    write of the same tool needs, for that argument, one that neither the instruction, the conversation nor the
    database holds (a passenger's birth date no record gives). The failure is the task's whatever else the agent
    did: the episode could not have been won."""
    messages = trajectory.messages
    seen = "\n".join(
        [trajectory.privileged.instruction, domain.policy] + [json.dumps(m.get("content")) for m in messages]
    )

    def unreachable(finding: Finding) -> bool:
        call = first_call(messages[finding.step])
        gold = finding.expected
        if call is None or gold is None or gold.name != call.name:
            return False
        agent = call.arguments
        for key, value in gold.kwargs.items():
            if agent.get(key) == value:
                continue
            hidden = [v for v in string_values(value) if v not in seen and json.dumps(v) not in _database_text(domain)]
            if hidden and all(v in seen for v in string_values(agent.get(key))):
                return True
        return False

    return any(unreachable(finding) for finding in critical)


def _shown(trajectory: Trajectory, step: int) -> str:
    """All the user and the tools had said before message `step`."""
    return "\n".join(m.get("content") or "" for m in trajectory.messages[:step] if m["role"] in ("user", "tool"))


_CARD_DIGITS = re.compile(r"\b(?:ending|ends|last (?:four|4)(?: digits)?)\D{0,12}(\d{4})\b")


def _user_chose_payment(trajectory: Trajectory, step: int, action: Action, expected: Action | None) -> bool:
    if expected is None or expected.name != action.name:
        return False
    differing = [key for key in action.kwargs if expected.kwargs.get(key) != action.kwargs[key]]
    if not differing or any(key not in PAYMENT_KEYS for key in differing):
        return False
    chosen = [text for key in differing for text in string_values(action.kwargs[key])]
    shown = _shown(trajectory, step)
    if any(text not in shown for text in chosen):
        return False  # a payment the agent guessed is its own error
    user = said_by_user(trajectory.messages, step).lower()
    digits = set(_CARD_DIGITS.findall(user))
    for text in chosen:
        kind = payment_kind(text)
        records = [record for record, _ in shown_records(trajectory.messages, step, text)]
        if digits and kind == "credit_card" and not any(str(record.get("last_four")) in digits for record in records):
            return False  # the user named a card by its last digits, and this one was never shown to hold them
        if (
            text in user
            or text.split("_")[-1] in user
            or describes(user, descriptions(trajectory.messages, step, text))
            or (kind is not None and _named_by_balance(user, kind, records))
        ):
            continue  # the user named this very payment method (or its card's brand or last digits, and no other's)
        others = set(re.findall(rf"\b{kind}_\d+", shown)) - {text} if kind else {text}
        if kind is None or others or not any(word in user for word in PAYMENT_WORDS[kind]):
            return False  # the user named no payment of this kind, or one of several the user holds
    return True


def _named_by_balance(user: str, kind: str, records: list[dict]) -> bool:
    """Whether the user named a payment method by its kind and its balance ("the travel certificate for $150")."""
    amounts = {f"{record['amount']:g}" for record in records if isinstance(record.get("amount"), (int, float))}
    said = set(numbers_in(user))
    return any(word in user for word in PAYMENT_WORDS[kind]) and bool(amounts & said)


def _user_chose_target(
    trajectory: Trajectory, domain: Domain, step: int, action: Action, expected: Action | None
) -> bool:
    """Whether the only wrong values of a write are the records it acts on, each named first by the user: the
    agent's message before the user named it did not name it, or named the gold record too (a choice offered)."""
    if expected is None or expected.name != action.name:
        return False
    differing = [key for key in action.kwargs if expected.kwargs.get(key) != action.kwargs[key]]
    if not differing or any(key not in TARGET_KEYS for key in differing):
        return False
    messages = trajectory.messages
    confirmed, words = proposal_of(messages, step), topic_words(action.name)
    if confirmed is not None and words and not any(word in messages[confirmed]["content"].lower() for word in words):
        return False  # the user said yes to another act (a reschedule, and the agent cancelled)
    for key in differing:
        value, right = str(action.kwargs[key]), str(expected.kwargs.get(key))
        named = next(
            (i for i in range(1, step) if messages[i]["role"] == "user" and _names_alone(messages[i], value, right)),
            None,
        )
        if named is None:
            return False  # the user never chose this record over the gold one
        offer = next((i for i in range(named - 1, 0, -1) if agent_text(messages[i])), None)
        if offer is not None and _names_alone(messages[offer], value, right):
            return False  # the agent put this record forward alone
        if confirmed is not None and _names_alone(messages[confirmed], right, value):
            return False  # the user said yes to the gold record, and the agent wrote another
    return not _forbidden(trajectory, domain, step, action)


def _user_added_record(trajectory: Trajectory, domain: Domain, step: int, action: Action) -> bool:
    """Whether a write acts on a record no gold action touches or names, which the user itself named first, asking
    for this act: a request beyond the task, carried out as asked (unless the policy forbids it)."""
    acted_on = record_ids(action)
    gold = [value for a in trajectory.privileged.gold_actions for value in string_values(a.kwargs)]
    if not acted_on or any(record in value for record in acted_on for value in gold):
        return False  # a gold action touches it, or names it (a hand-off's summary)
    messages, words = trajectory.messages, topic_words(action.name)
    for record in acted_on:
        asked = next(
            (
                i
                for i in range(1, step)
                if messages[i]["role"] == "user"
                and mentions(messages[i].get("content") or "", record)
                and any(word in (messages[i].get("content") or "").lower() for word in words)
            ),
            None,
        )
        if asked is None or any(mentions(agent_text(messages[i]), record) for i in range(1, asked)):
            return False  # the user never asked for it, or chose it from what the agent put forward
    return not _forbidden(trajectory, domain, step, action)


def _shown_options(messages: list[dict], before: int, item_id: str) -> dict[str, str] | None:
    """An item's options ({"capacity": "1000ml", ...}) as the first tool result before message `before` that lists
    it shows them."""
    return next(
        (
            {str(k): str(v).lower() for k, v in record["options"].items()}
            for record, _ in shown_records(messages, before, item_id)
            if record.get("item_id") == item_id and isinstance(record.get("options"), dict)
        ),
        None,
    )


def _user_left_open(trajectory: Trajectory, step: int, action: Action, expected: Action | None) -> bool:
    """Whether the only wrong values of a write are new items the agent described in the message the user said yes
    to, each sharing with the gold's item an option the user asked for and differing from it only in options the
    user never spoke of (`fault.user_withheld_detail`); a new item put in place of items the gold changes to
    different ones (two identical kettles, both made ceramic) is the agent's choice."""
    if expected is None or expected.name != action.name:
        return False
    differing = [key for key in action.kwargs if expected.kwargs.get(key) != action.kwargs[key]]
    if not differing or any(key != "new_item_ids" for key in differing):
        return False
    ours, gold = action.kwargs["new_item_ids"], expected.kwargs.get("new_item_ids")
    messages, proposal = trajectory.messages, proposal_of(trajectory.messages, step)
    if proposal is None or not isinstance(ours, list) or not isinstance(gold, list) or len(ours) != len(gold):
        return False
    user = said_by_user(messages, step)

    def spoken(value: str) -> bool:
        return describes(user, [((value,), [])])

    for item, gold_item in zip(ours, gold):
        if item == gold_item:
            continue
        if len({g for o, g in zip(ours, gold) if o == item}) > 1:
            return False  # one choice put on items the gold changes to different ones: the agent's, not the user's
        options, gold_options = _shown_options(messages, step, item), _shown_options(messages, step, gold_item)
        if options is None or gold_options is None or options.keys() != gold_options.keys():
            return False
        apart = [key for key in options if options[key] != gold_options[key]]
        asked = [key for key in options if key not in apart and spoken(options[key])]
        own = [(words, []) for words, _ in descriptions(messages, step, item)]  # beside the old item, say
        said = mentions(messages[proposal]["content"], item) or describes(messages[proposal]["content"], own)
        if not asked or not said or any(spoken(gold_options[key]) for key in apart):
            return False  # the user asked by no option, never heard this item, or said what picks the gold's
    return True


def _user_left_out_items(trajectory: Trajectory, step: int, action: Action, expected: Action | None) -> bool:
    """Whether a write lacks some of the gold write's items on the same record, and nothing else differs, where the
    agent had named each left-out item to the user, the user named each item the write holds, and no user turn
    before the write names a left-out one: the user chose the items (`fault.user_left_out_items`)."""
    if expected is None or expected.name != action.name:
        return False
    ours, gold = action.kwargs.get("item_ids"), expected.kwargs.get("item_ids")
    if not isinstance(ours, list) or not isinstance(gold, list) or not set(ours) < set(gold):
        return False
    if any(action.kwargs.get(key) != value for key, value in expected.kwargs.items() if not key.endswith("_ids")):
        return False
    if "new_item_ids" in expected.kwargs:  # an exchange or item change keeps the gold's pairing for the items it holds
        pairs = dict(zip(gold, expected.kwargs["new_item_ids"]))
        if list(action.kwargs.get("new_item_ids") or []) != [pairs[item] for item in ours]:
            return False
    messages = trajectory.messages
    names = {item: item_names(messages, step, Action(name=action.name, kwargs={"item_ids": [item]})) for item in gold}
    if not all(names.values()):
        return False
    told = "\n".join(agent_text(m) for m in messages[1:step]).lower()
    user = said_by_user(messages, step).lower()
    left_out = [item for item in gold if item not in ours]
    return (
        all(any(name in told for name in names[item]) for item in left_out)
        and all(any(name in user for name in names[item]) for item in ours)
        and not any(name in user for item in left_out for name in names[item])
    )


def _user_chose_option(trajectory: Trajectory, step: int, action: Action, expected: Action | None) -> bool:
    """Whether the only wrong values of a write are words the user chose from a choice the agent set out with the
    gold's value beside them ("no longer needed" or "ordered by mistake"), said by the user in its turn after that
    message (`fault.user_chose_option`)."""
    if expected is None or expected.name != action.name:
        return False
    differing = [key for key in action.kwargs if expected.kwargs.get(key) != action.kwargs[key]]
    if not differing or any(not isinstance(action.kwargs[key], str) for key in differing):
        return False
    if any(key in TARGET_KEYS or key in PAYMENT_KEYS for key in differing):
        return False  # records and payments have their own rules
    messages = trajectory.messages
    for key in differing:
        chosen, gold = action.kwargs[key].lower(), str(expected.kwargs.get(key, "")).lower()
        offer = next(
            (
                i
                for i in range(step - 1, 0, -1)
                if chosen in agent_text(messages[i]).lower() and gold in agent_text(messages[i]).lower()
            ),
            None,
        )
        if offer is None or not any(
            m["role"] == "user" and chosen in (m["content"] or "").lower() for m in messages[offer + 1 : step]
        ):
            return False
    return True


def _names_alone(message: dict, value: str, other: str) -> bool:
    """Whether a message names `value` and not `other`."""
    text = message.get("content") or ""
    return mentions(text, value) and not mentions(text, other)


def _forbidden(trajectory: Trajectory, domain: Domain, step: int, action: Action) -> bool:
    """Whether the policy forbids the act on the record the user chose (then carrying it out is the agent's error)."""
    if action.name != "cancel_reservation":
        return False
    db = replay_record(domain, trajectory, step).db
    said = said_by_user(trajectory.messages, step)
    return cancellation(domain, db, str(action.kwargs.get("reservation_id", "")), said) == "forbidden"


def _payment_unspecified(trajectory: Trajectory, step: int, action: Action, expected: Action | None) -> bool:
    """Whether the only wrong value of a write is a payment method the agent named in the message the user said yes
    to, where the hidden instruction says nothing of paying: no user could have asked for the gold's method."""
    if expected is None or expected.name != action.name:
        return False
    differing = [key for key in action.kwargs if expected.kwargs.get(key) != action.kwargs[key]]
    if not differing or any(key not in PAYMENT_KEYS for key in differing):
        return False
    instruction = trajectory.privileged.instruction.lower()
    if re.search(r"\bpa(?:y|id)\w*|\bcard\b|\bcertificate|\brefund", instruction):
        return False
    proposal = proposal_of(trajectory.messages, step)
    if proposal is None:
        return False
    said = trajectory.messages[proposal]["content"]
    chosen = [text for key in differing for text in string_values(action.kwargs[key])]
    shown = _shown(trajectory, step)
    return all(text in shown for text in chosen) and all(  # a payment the agent guessed is its own error
        mentions(said, text)
        or describes(said, descriptions(trajectory.messages, step, text))
        or any(word in said.lower() for word in PAYMENT_WORDS.get(payment_kind(text) or "", ()))
        for text in chosen
    )


_NO_USER_ID = re.compile(
    r"\b(?:don'?t|do not|can'?t|cannot) (?:have|remember|recall|find|know)\b[^.?!]{0,20}?\buser ?id\b", re.I
)
_NOT_AT_HAND = re.compile(  # "I don't have that information with me": the answer to a request for the id
    r"\b(?:don'?t|do not|can'?t|cannot) (?:have|remember|recall|find|know)\b (?:that|it|this|those|them)\b", re.I
)


def _user_withheld_id(trajectory: Trajectory, domain: Domain) -> bool:
    """Whether the user said it has no user id though its instruction gives one ("I don't have my user id", or "I
    don't have that" to the agent's request for it), and never gave it: the agent could not authenticate it, as
    the policy requires before any change."""
    instruction, messages = trajectory.privileged.instruction, trajectory.messages
    ids = set(re.findall(r"\b[a-z]+_[a-z]+_\d+\b", instruction)) & set(_user_ids(domain))
    user = [(m.get("content") or "").replace("\u2019", "'") for m in messages if m["role"] == "user"]
    given = [value for value in ids if value in instruction and not any(value in text for text in user)]

    def withholds(index: int) -> bool:
        text = (messages[index].get("content") or "").replace("\u2019", "'")
        asked = next((agent_text(messages[i]) for i in range(index - 1, 0, -1) if agent_text(messages[i])), "")
        return bool(_NO_USER_ID.search(text)) or (
            bool(_NOT_AT_HAND.search(text)) and re.search(r"\buser ?id\b", asked, re.I) is not None
        )

    return bool(given) and any(withholds(i) for i, m in enumerate(messages) if m["role"] == "user")


_CONDITION = re.compile(r"\bif (?:available|possible|there (?:is|are)|it is possible|any)\b|\bonly if\b", re.I)


def _user_asked_past_condition(trajectory: Trajectory, domain: Domain, step: int, action: Action) -> bool:
    """Whether a write changes a record the gold solution never writes, that the instruction wants changed only on
    a condition ("change M20IZO to a nonstop flight if available"), after the agent said the condition fails ("no
    nonstop flights are available") and the user asked for the act anyway: a request beyond the instruction."""
    records, words = record_ids(action), topic_words(action.name)
    gold_writes = [a for a in trajectory.privileged.gold_actions if domain.tool_kind(a.name) == "write"]
    if not records or any(record in string_values(a.kwargs) for a in gold_writes for record in records):
        return False
    instruction = sentences(trajectory.privileged.instruction)
    if not any(_CONDITION.search(s) and any(record in s for record in records) for s in instruction):
        return False
    messages = trajectory.messages
    failed = next((i for i in range(1, step) if REFUSAL.search(agent_text(messages[i]))), None)
    return failed is not None and any(
        messages[i]["role"] == "user" and any(word in (messages[i].get("content") or "").lower() for word in words)
        for i in range(failed + 1, step)
    )


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
    """Whether the failure is the gold solution's disagreement with the policy: a gold write the policy forbids
    whatever the user says (no agent that keeps to the policy could win), or the agent declined a gold cancellation
    the policy forbids for the reason the user gave, or a gold certificate the user never asked for in a
    conversation the user ended (an agent's transfer cut it short), or the only wrong write is a cancellation the
    policy allows, asked for and confirmed, that the gold solution never makes."""
    gold = list(trajectory.privileged.gold_actions)
    forbidden = forbidden_gold_write(
        domain, trajectory.split, trajectory.task_id, json.dumps([a.model_dump() for a in gold])
    )
    if forbidden is not None:
        task = domain.task(trajectory.split, trajectory.task_id)
        agents = forbidden_writes(domain, task, [call.action for _, call in tool_turns(trajectory.messages)])
        if not any(a.name == forbidden.name and record_ids(a) == record_ids(forbidden) for a in agents):
            return True  # the gold needs a write no agent that keeps to the policy makes, and this one made none
    for finding in critical:
        missing = finding.missing or finding.expected
        if (
            finding.signal == "replay.gold_write_missing"
            and missing is not None
            and missing.name == "cancel_reservation"
        ):
            before = domain.replay(domain.tool_actions(gold[: gold.index(missing)] if missing in gold else [])).db
            reservation = missing.kwargs.get("reservation_id", "")
            verdict = cancellation(domain, before, reservation, said_by_user(trajectory.messages))
            if verdict == "forbidden" and refusal(trajectory.messages, finding.step, missing) is not None:
                return True  # forbidden for the reason the user gave, and the agent declined, as the policy requires
        if (
            finding.signal == "replay.gold_write_missing"
            and missing is not None
            and missing.name == "send_certificate"
            and trajectory.outcome.termination_reason == "user_stop"
            and compensation(domain, said_by_user(trajectory.messages)) == "forbidden"
        ):
            return True  # compensation the user never asked for, though free to: the policy forbids offering it
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


def episode_fault(
    trajectory: Trajectory, domain: Domain, critical: list[Finding], choices: list[str | None]
) -> str | None:
    """Why a failed episode is the user's or the task's fault (a `fault.*` signal), or None when an agent
    action is to blame; `choices` are the critical findings' `user_choice`s, in order."""
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
    if (
        critical
        and all(f.signal == "replay.gold_write_missing" for f in critical)
        and _user_withheld_id(trajectory, domain)
    ):
        return "fault.user_withheld_id"
    return choices[0] if critical and all(choices) else None  # the user's choices explain every finding


def _user_declined(trajectory: Trajectory, gold: Action) -> bool:
    """Whether the user turned a needed change down: an agent message offered the change's act for several of the
    user's records shown together (a profile's reservations), this one among them (no paragraph that speaks of the
    act names others without it), and the user's answer chose others of them only, and never asked for this one
    after (its instruction wanted them all)."""
    messages, words = trajectory.messages, specific_words(gold.name)
    among = shown_among(messages, gold, len(messages))
    if among is None:
        return False
    record, shape, shown, siblings = among
    for index in range(shown + 1, len(messages)):
        text = agent_text(messages[index])
        offered = set(shape.findall(text)) & siblings
        about = [part for part in text.split("\n\n") if any(word in part.lower() for word in words)]
        if record not in text or not offered or not about:
            continue
        if any(set(shape.findall(part)) & siblings and record not in part for part in about):
            continue  # the act was offered for others: this record was only listed
        reply = next((i for i in range(index + 1, len(messages)) if messages[i]["role"] == "user"), None)
        if reply is None:
            return False
        chosen = set(shape.findall(messages[reply]["content"] or ""))
        asked_later = any(record in (m["content"] or "") for m in messages[reply:] if m["role"] == "user")
        return bool(chosen) and chosen <= offered and not asked_later
    return False


_PUTS_OFF = re.compile(  # an answer that puts the change off: "I'll handle the expensive one later"
    r"\b(?:later|another time|reach out again|come back|get back to you|not now|for now|hold off)\b", re.I
)
_OFFERS = re.compile(r"\bwould you (?:like|prefer|want) to\b|\bi (?:can|could|will)\b|\bi'll\b", re.I)
_ASKS_ABOUT = re.compile(r"\bconfirm (?:if|whether)\b|\b(?:which|what|where|when)\b", re.I)  # "confirm if it was..."


def _offers_change(messages: list[dict], index: int, gold: Action, names: set[str]) -> bool:
    """Whether agent message `index` offers the gold write itself and asks the user to go ahead: it refuses nothing,
    a sentence asks to go ahead with its act (not about a fact: "could you confirm if the bicycle was in this
    order?"), a paragraph names its record, or every item it acts on, with the words of its act, and the message
    sets out each new item it sets (by id or description). A list of records to choose from offers none of them."""
    text = agent_text(messages[index])
    words = specific_words(gold.name)
    if (
        not (ASKS_TO_CONFIRM.search(text) or "?" in text)
        or REFUSAL.search(text)
        or not any(
            (ASKS_TO_CONFIRM.search(sentence) or _OFFERS.search(sentence))
            and any(word in sentence.lower() for word in words)
            and not _ASKS_ABOUT.search(sentence)
            for sentence in sentences(text)
        )
    ):
        return False  # no sentence offers the act: a question about a fact offers nothing
    if not any(
        any(word in part.lower() for word in words)
        and (any(mentions(part, token) for token in targets(gold)) or (names and all(n in part.lower() for n in names)))
        for part in text.split("\n\n")
    ):
        return False
    return all(item in text or describes(text, descriptions(messages, index, item)) for item in new_item_ids(gold))


def _user_turned_down(trajectory: Trajectory, gold: Action) -> bool:
    """Whether the user turned the needed change down when the agent offered it (`_offers_change`): the user's
    answer was no yes and asked for no such act (or put it off: "later", "reach out again"), and no user turn after
    it asked for the act on its record or items again."""
    messages = trajectory.messages
    names = item_names(messages, len(messages), gold)
    words = topic_words(gold.name)

    def asks_for_it(text: str, named: bool) -> bool:
        lowered = text.lower()
        return any(word in lowered for word in words) and not _PUTS_OFF.search(text) and named

    for index in range(1, len(messages)):
        if messages[index]["role"] != "assistant" or not _offers_change(messages, index, gold, names):
            continue
        reply = next((i for i in range(index + 1, len(messages)) if messages[i]["role"] == "user"), None)
        if reply is None:
            return False
        answer = messages[reply]["content"] or ""
        if is_confirmation(answer, agent_text(messages[index])) or asks_for_it(answer, True):
            return False  # a yes, or the act asked for in other words: what went wrong after is the agent's
        later = [m["content"] or "" for m in messages[reply + 1 :] if m["role"] == "user"]
        return not any(
            asks_for_it(text, any(mentions(text, t) for t in targets(gold)) or any(n in text.lower() for n in names))
            for text in later
        )
    return False


_COVERING = re.compile(  # words that ask for the items without naming them: "return everything but the mouse"
    r"\b(?:everything|anything|all (?:my|of|the|items|orders|possible)|every (?:item|order)|the rest)\b"
)


def _user_never_asked(trajectory: Trajectory, gold: Action) -> bool:
    """Whether a needed item change was never asked for: the user named, item by item, the items of the gold
    solution's other item changes, never with words that cover the rest ("everything"), and no user turn names
    this change's record or any of its items, by a word of the name the tool results give it ("camera" for a
    Digital Camera) or a word inside one ("watch" in Wristwatch), though the agent read them."""
    messages = trajectory.messages
    user = said_by_user(messages, len(messages)).lower()
    said = set(re.findall(r"[a-z]{4,}", user))

    def named(action: Action) -> bool | None:
        names = item_names(messages, len(messages), action)
        parts = {part for name in names for part in re.findall(r"[a-z]{4,}", name)}
        return any(part in said or any(word in part for word in said) for part in parts) if parts else None

    if named(gold) is not False or _COVERING.search(user):
        return False  # it was named, or its items were never read, or the user asked for all of them
    others = [action for action in trajectory.privileged.gold_actions if action != gold]
    itemised = any(named(action) for action in others)
    return itemised and not any(mentions(user, record.lower()) for record in targets(gold))


_KIND_NAMES = {"gift_card": ("gift card",), "credit_card": ("credit card",), "paypal": ("paypal",)}


def _user_refused_payment(trajectory: Trajectory, gold: Action) -> bool:
    """Whether a user turn refused every kind of payment method the gold write pays with ("no, I don't use
    PayPal"), a kind its hidden instruction never names."""
    kinds = {payment_kind(payment) for payment in payment_ids(gold)}
    if not kinds or not kinds <= set(_KIND_NAMES):
        return False
    instruction = trajectory.privileged.instruction.lower()
    user = said_by_user(trajectory.messages, len(trajectory.messages)).lower().replace("\u2019", "'")
    return all(
        not any(name in instruction for name in _KIND_NAMES[kind])
        and any(
            re.search(rf"\b(?:don'?t|do not|won'?t|will not|not|no)\b(?: \w+){{0,3}} {re.escape(name)}", user)
            for name in _KIND_NAMES[kind]
        )
        for kind in kinds
    )


def user_choice(trajectory: Trajectory, domain: Domain, finding: Finding) -> str | None:
    """The user's choice that explains a wrong write or a needed change never made, as a `fault.*` signal, or None
    (another finding, or the agent's own choice)."""
    if finding.signal == "replay.gold_write_missing" and finding.missing is not None:
        if _user_never_asked(trajectory, finding.missing):
            return "fault.user_never_asked"
        if _user_refused_payment(trajectory, finding.missing):
            return "fault.user_refused_payment"
        declined = _user_declined(trajectory, finding.missing) or _user_turned_down(trajectory, finding.missing)
        return "fault.user_declined" if declined else None
    if finding.signal not in ("replay.write_off_gold", "replay.write_missed_gold"):
        return None
    call = first_call(trajectory.messages[finding.step])
    if call is None:
        return None
    action = call.action
    if _user_chose_payment(trajectory, finding.step, action, finding.expected):
        return "fault.user_chose_payment"
    if _payment_unspecified(trajectory, finding.step, action, finding.expected):
        return "fault.gold_payment_unspecified"
    if _user_chose_target(trajectory, domain, finding.step, action, finding.expected):
        return "fault.user_chose_target"
    if _user_left_open(trajectory, finding.step, action, finding.expected):
        return "fault.user_withheld_detail"
    if _user_left_out_items(trajectory, finding.step, action, finding.expected):
        return "fault.user_left_out_items"
    if _user_chose_option(trajectory, finding.step, action, finding.expected):
        return "fault.user_chose_option"
    if (
        _user_asked(trajectory, finding.step, action, finding.expected)
        or _user_added_record(trajectory, domain, finding.step, action)
        or _user_asked_past_condition(trajectory, domain, finding.step, action)
    ):
        return "fault.user_asked"
    return None


def with_counterparts(findings: list[Finding], choices: list[str | None]) -> list[str | None]:
    """`choices` (the findings' `user_choice`s), where a gold write never made that a write the user chose stood for
    (the same tool, made otherwise) takes that choice: the booking paid by the user's card leaves the gold's
    certificate unspent."""
    chosen = [
        (finding.expected, choice)
        for finding, choice in zip(findings, choices)
        if choice and finding.expected is not None and finding.category != "wrong_tool"
    ]
    return [
        choice
        or next(
            (c for gold, c in chosen if finding.signal == "replay.gold_write_missing" and gold == finding.missing), None
        )
        for finding, choice in zip(findings, choices)
    ]
