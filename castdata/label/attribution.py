"""Where an error was said: moving a replay finding to the agent turn that put the episode on its failing path.

Replay locates the write that changed the wrong records, or the end of an episode that never made a needed
change or never told a required answer. Real agents commit to the error earlier, in what they tell the user:

- **a proposal that carries the error**: a wrong write (wrong values, or an act the gold solution never makes)
  that the user confirmed was already in the agent's message the user said yes to, and in the messages that
  offered it before, when they name the write's wrong values (or, for an act gold never makes, its target or the
  flights or items it sets). The error is the first of those messages, unless the write made the plan's next
  needed write on its record fail (the items changed before the address): then the write itself is the error
  (`replay.blocked_later_write`, `wrong_sequence`). A write made on no yes of its own (after a failed try or a
  payment question), or on a yes to a message that named none of its wrong values ("proceed with both
  exchanges?"), carries out the latest plan naming them that the user said yes to. A write whose wrong values no
  message named is its own error;
- **a refusal**: a needed change never made, after the agent had looked at the record it concerns and told the
  user it cannot be done (naming the record, the act, or in one paragraph an item the change acts on), and never
  tried it or asked to confirm it after, or after it kept requiring a record's id the user said it does not have,
  instead of looking the record up, or after it refused to look the user up by the details of an auth tool the
  user had given (a name and zip code), authenticating nobody (`wrong_refusal`). An offer of a transfer, or of the
  act on a condition the user must meet ("if you can recall the address"), offers nothing. A refusal that reports
  the error of the agent's own failed write, made since the user's last turn, rests on that write: the write is
  the error; a failed try the agent went on pursuing with the user, then gave up, was dropped at the refusal; an
  act the gold solution never makes, which the user asked for in answer to the agent's message declining the
  needed one or saying it falls short ("would not bring the total below $1131"), began at that message;
- **a false word about a product's variants**: any critical error but one of timing began earlier where the agent
  told the user something about the variants of a product its writes act on that the catalogue disproves ("the
  largest size available is 50ml"; `castdata.label.catalogue`, `said.catalogue`);
- **a wrong answer**: a required answer never told, where the agent answered the user's question with another
  value, or refused to (`misread_observation` / `wrong_refusal`), also when the user asked only after the closing
  message the replay charged;
- **a loop the step limit ended**: a needed change or answer never given, in an episode the step limit ended
  while the agent silently repeated earlier calls, began at the loop's first repeat (`replay.step_limit_loop`,
  `redundant_action`);
- **a request pursued that needed a hand-off**: where the gold solution only transfers the user, a write the
  agent made instead began at the call whose result brought the value it set (`replay.hand_off_needed`).
"""

from __future__ import annotations

import calendar
import json
import re
from collections.abc import Iterator
from typing import Any

from castdata.envs import Domain, Task
from castdata.label.acts import TARGET_KEYS, record_ids, signature, specific_words, topic_words
from castdata.label.catalogue import false_claim, products_of, record_items
from castdata.label.findings import Finding
from castdata.label.payments import payment_kind
from castdata.label.replay import write_category
from castdata.label.rules import ASKS_TO_CONFIRM, ask_to_confirm, is_confirmation
from castdata.messages import call_failed, calls, first_call, is_agent_text, tool_turns
from castdata.records import RESPOND, Action, Trajectory
from castdata.visible import said_by_user

REFUSAL = re.compile(
    r"\b(?:can ?not|can't|cannot|unable to|not able to|not possible|isn't possible|not eligible|ineligible|"
    r"not allowed|isn't allowed|don't have (?:the )?(?:ability|access)|do not have (?:the )?(?:ability|access)|"
    r"only (?:able|possible)|unfortunately|not permitted|won't be able|(?:can|may) only(?! be (?:done|made|modified) once)|"
    r"(?:do not|don't) see any|(?:could not|couldn't) find|(?:does|do) not have (?:a|an|any)|"
    r"none of (?:your|the) \w+ (?:includes?|contains?|ha(?:s|ve)|holds?)|"
    # a claim that what the user asked for does not exist ("no blue variant available", "did not find a speaker")
    r"(?:did not|didn't) find|(?:do not|don't) see (?:a|an|the)|(?:am not|'m not|not) seeing (?:a|an|the|any)|"
    r"not (?:showing(?: up)?|shown|listed|appearing) as available|"
    r"there (?:is|are) (?:currently )?no|not (?:currently )?available|unavailable|out of stock|not in stock|"
    r"(?:does|do|did) not appear (?:in|among|to be available)|"
    r"(?:does not|doesn't|do not|don't) (?:seem to )?(?:match|correspond to) (?:any|an?)\b|"
    r"(?:contains?|holds?|has|have|includes?) an? [^.?!]{1,60}, not an?|"  # "it holds a black XXL one, not a small one"
    r"(?:only|just) one \w+(?: \w+)? (?:variant|option|model)s? (?:is )?available|(?:is|are) only available in)\b",
    re.I,
)
_ASKS_TO_BE_TOLD = (  # a user turn that asks to be told something ("I'd like to know the sum of my balances")
    r"\b(?:how (?:many|much)|total|sum of|balances?|tell me|give me the|let me know|(?:like|want|need) to know|"
    r"what (?:is|are|was|were))\b"
)
INFO_QUESTION = re.compile(_ASKS_TO_BE_TOLD, re.I)
_IDENTITY = re.compile(r"\b(?:e-?mail|user id|zip code|your account|your identity|authenticat)", re.I)
QUESTION = re.compile(r"\?|" + _ASKS_TO_BE_TOLD, re.I)  # or any question ("can you help me with that?")
_RECORD_ID = r"\b(?:reservation|order|booking|confirmation) ?(?:id|number|code|#)"
_LACKS = re.compile(  # the user says it has no record id at hand
    r"\b(?:don'?t|do not|can'?t|cannot|couldn'?t) (?:have|remember|recall|find|locate|know)\b"
    r"(?:(?!\bid\b)[^.?!,]){0,25}?" + _RECORD_ID,
    re.I,
)
_BLANK = {"none", "no", "n/a", ""}  # an option value no message says as such ("no features")
_ISO_DATE = re.compile(r"\d{4}-(\d{2})-(\d{2})")
_NUMBER = re.compile(r"(?<![\w.])\$?\d[\d,]*(?:\.\d+)?(?![\w])")


def sentences(text: str) -> list[str]:
    """A text cut into sentences (after each `.`, `!` or `?` that a space follows)."""
    return re.split(r"(?<=[.!?])\s+", text)


def agent_text(message: dict[str, Any]) -> str:
    """What an agent message says to the user ("" for any other message)."""
    return message.get("content") or "" if message["role"] == "assistant" else ""


def _agent_texts(messages: list[dict[str, Any]], before: int) -> list[int]:
    """Indices of the agent's messages to the user before `before` (a turn with a tool call and text counts)."""
    return [i for i in range(1, before) if messages[i]["role"] == "assistant" and messages[i].get("content")]


def mentions(text: str, token: str) -> bool:
    """Whether a text names an identifier (an order id with or without its `#`)."""
    return token in text or token.lstrip("#") in text


def _records(value: Any, token: str) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """The records (JSON objects) in a tool result that stand for `token` (holding it as a value, or keyed by it),
    each with its siblings: the other records of the list or mapping that holds it (a product's other variants)."""
    found = []
    members = list(value.values()) if isinstance(value, dict) else value if isinstance(value, list) else []
    for index, item in enumerate(members):
        if isinstance(item, dict) and (
            token in item.values() or (isinstance(value, dict) and list(value)[index] == token)
        ):
            found.append((item, [other for other in members if isinstance(other, dict) and other is not item]))
        found += _records(item, token)
    return found


def _description(record: dict[str, Any]) -> list[tuple[str, ...]]:
    """The words that name a record without its id: its price, a payment method's kind, its card's brand or last
    four digits, all its option values."""
    found = []
    if isinstance(record.get("price"), (int, float)):
        found.append((f"{record['price']:,.2f}",))
    if isinstance(record.get("last_four"), str):
        found.append((record["last_four"],))
    if isinstance(record.get("brand"), str):
        found.append((record["brand"].lower(),))
    if isinstance(record.get("source"), str):  # a payment method's kind: "certificate", "gift card", "paypal"
        found.append((record["source"].replace("_", " ").lower(),))
    options = record.get("options")
    if isinstance(options, dict):
        words = tuple(str(v).lower() for v in options.values() if str(v).lower() not in _BLANK)
        if len(words) >= 2:
            found.append(words)
    return found


def descriptions(
    messages: list[dict[str, Any]], before: int, token: str, kin: frozenset[str] = frozenset()
) -> list[tuple[tuple[str, ...], list]]:
    """How a message may name `token` without its id, from the tool results before `before` that show its record
    (an item's "8-inch, 64GB, silver", its price), each with the descriptions of the record's siblings: a message
    that also describes a sibling lists choices, and names none of them, unless the sibling is `kin` (another value
    of the same write: "change it from the large one to the medium one"). A payment method of a kind no result
    showed the user to hold (a guess) is named by its kind ("gift card")."""
    found = []
    for record, siblings in shown_records(messages, before, token):
        others = [words for sibling in siblings if sibling.get("item_id") not in kin for words in _description(sibling)]
        found += [(words, others) for words in _description(record)]
    kind = payment_kind(token)
    if not found and kind and token.startswith(f"{kind}_") and not _tools_said(messages, before, f"{kind}_"):
        found.append(((kind.replace("_", " "),), []))  # a kind of payment the user was never shown to hold
    return found


def shown_records(messages: list[dict[str, Any]], before: int, token: str) -> Iterator[tuple[dict, list[dict]]]:
    """The records standing for `token` (`_records`), with their siblings, in the tool results before `before`."""
    for message in messages[1:before]:
        if message["role"] != "tool" or token not in (message["content"] or ""):
            continue
        try:
            result = json.loads(message["content"])
        except ValueError:
            continue
        if isinstance(result, dict) and token in result.values():
            yield result, []  # the lookup returned the record itself (one variant)
        yield from _records(result, token)


def _tools_said(messages: list[dict[str, Any]], before: int, text: str) -> bool:
    return any(m["role"] == "tool" and text in (m["content"] or "") for m in messages[1:before])


def describes(text: str, described: list[tuple[tuple[str, ...], list]]) -> bool:
    """Whether a message names one record by its description, and no sibling of it."""
    lowered = text.lower()

    def holds(words: tuple[str, ...]) -> bool:
        return all(re.search(rf"(?<![\w.]){re.escape(word)}(?![\w])", lowered) for word in words)

    return any(holds(words) and not any(holds(other) for other in others) for words, others in described)


def targets(action: Action) -> list[str]:
    """The identifiers a write acts on (order, reservation, user ids): what a plan or an offer names."""
    return [str(action.kwargs[key]) for key in TARGET_KEYS if isinstance(action.kwargs.get(key), str)]


def new_item_ids(action: Action) -> list[str]:
    """The items an item change or exchange sets (`new_item_ids`), as strings."""
    items = action.kwargs.get("new_item_ids")
    return [str(item) for item in items] if isinstance(items, list) else []


def string_values(value: Any) -> list[str]:
    """The string leaves (3 characters or more) of a value: ids, names, reasons, flight numbers."""
    if isinstance(value, dict):
        return [text for item in value.values() for text in string_values(item)]
    if isinstance(value, list):
        return [text for item in value for text in string_values(item)]
    return [value] if isinstance(value, str) and len(value) >= 3 else []


def wrong_tokens(action: Action, expected: Action | None) -> list[str]:
    """What makes a write wrong, as a message would name it: its string values that differ from the expected write
    of the same tool; for a write the gold solution has no counterpart of, its targets (the act itself is wrong)."""
    if expected is None or expected.name != action.name:
        return targets(action)
    return _values_not_in(action, expected)


def right_tokens(action: Action, expected: Action | None) -> list[str]:
    """The expected write's values in place of `wrong_tokens` (none for a write of another tool)."""
    if expected is None or expected.name != action.name:
        return []
    return _values_not_in(expected, action)


def _values_not_in(action: Action, other: Action) -> list[str]:
    """The string values of `action`'s arguments that differ from `other`'s, and that `other` does not hold there."""
    found = []
    for key, value in action.kwargs.items():
        if other.kwargs.get(key) != value:
            held = set(string_values(other.kwargs.get(key)))
            found += [text for text in string_values(value) if text not in held]
    return list(dict.fromkeys(found))


def _lists_wrong_count(text: str, action: Action, expected: Action | None) -> bool:
    """Whether a message lists one of a write's wrong counts: a line with the number and its field's word (the
    write's `total_baggages` 2 where the expected write has 0, said as "Total Checked Bags: 2")."""
    if expected is None or expected.name != action.name:
        return False
    for key, value in action.kwargs.items():
        other = expected.kwargs.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or not isinstance(other, int) or value == other:
            continue
        stems = [part[:3] for part in key.split("_") if len(part) > 4 and part not in ("total", "nonfree")]
        number = re.compile(rf"(?<![\w.$]){value}(?![\w.])")
        if any(number.search(line) and any(stem in line.lower() for stem in stems) for line in text.splitlines()):
            return True
    return False


def said_first(
    messages: list[dict[str, Any]],
    step: int,
    tokens: list[str],
    topic: tuple[str, ...] | None = None,
    values: tuple[str, ...] = (),
    right: tuple[str, ...] = (),
    act: tuple[str, ...] = (),
) -> int:
    """Where a write's error was first said: the first agent message of the unbroken run, ending with the latest
    one before `step`, that names one of `tokens` or describes one (`descriptions`), each no earlier than the latest
    tool result naming it (what the agent said of it rests on what it read). For a wrong act (`topic`: the words
    for what the write does), the latest message must speak of that act, else the write went against what was proposed and is its own error; it is
    the error even when it names no token, and so is each offer before it in the run that names one of the write's
    own `values` with a digit (the flights or items it sets, not its target), or names any of them ("business")
    where the user said yes to it and the agent asked again before acting. An earlier message that also names one of
    the `right` values (the expected write's, in place of the tokens) ends the run: it set out the choice, and the
    wrong one was picked later. With `act` (the write's words, when its error is the record it acts on), a message
    with no paragraph that names the record and speaks of the act ends the run too: it only showed the record (a
    listing of reservations). The run ends no later than the message the user said yes to: what the agent said
    after it, unanswered, carries no plan. `step` itself when no message carries the error."""
    floors = {  # the latest tool result naming each token: what the agent said of it rests on what it read
        token: max(
            (
                i
                for i in range(1, step)
                if messages[i]["role"] == "tool" and mentions(messages[i]["content"] or "", token)
            ),
            default=0,
        )
        for token in tokens
    }
    floor = max(floors.values(), default=0)
    searched = _searched_with(messages, floor, tokens)
    if searched is not None:
        return searched
    texts = [i for i in _agent_texts(messages, step) if i > min(floors.values(), default=0)]
    proposal = proposal_of(messages, step)
    if proposal is not None:  # what the agent said after the user's yes, unanswered, carries no plan
        texts = [i for i in texts if i <= proposal]
    if not texts:
        return step
    if topic and not any(word in messages[texts[-1]]["content"].lower() for word in topic):
        return step
    described = {token: descriptions(messages, step, token, frozenset(values)) for token in tokens}
    found = step
    for index in reversed(texts):
        text = messages[index]["content"]
        if not _names_token(index, text, tokens, floors, described):
            break
        if index != texts[-1] and any(mentions(text, value) for value in right):
            break
        if act and not _offers_listed(text, tokens, act):
            break
        found = index
    if found == step and not topic and not act:
        # on no yes of its own, or on a yes to a message that named none of its wrong values ("proceed with both
        # exchanges?"): the write carries out the offer of them the user said yes to before (and did not answer
        # with a question: "if I use my gift cards, will that cover it?")
        offer = _accepted_offer(messages, texts, tokens, floors, described, right)
        reply = next((i for i in range(offer + 1, step) if messages[i]["role"] == "user"), None) if offer else None
        if offer is not None and (proposal is None or "?" not in (messages[reply]["content"] or "")):
            found = offer
    if found == step and topic:  # a wrong act: the run of offers that name the write's values ends with the latest
        found = texts[-1]
        for position in range(len(texts) - 2, -1, -1):
            index, text = texts[position], messages[texts[position]]["content"]
            named = [value for value in values if mentions(text, value)]
            following = texts[position + 1]
            restated = not any(messages[i].get("tool_calls") for i in range(index, following))
            agreed = restated and proposal_of(messages, following) == index  # a yes to it, asked again, unacted
            if not any(re.search(r"\d", value) for value in named) and not (agreed and (named or _offers(text, topic))):
                break
            found = index
    return found


def _names_token(index: int, text: str, tokens: list[str], floors: dict[str, int], described: dict[str, list]) -> bool:
    """Whether the agent message at `index` names or describes one of `tokens`, after the latest tool result naming
    it (`floors`): what it said of it rests on what it read."""
    return any(
        index > floors[token] and (mentions(text, token) or describes(text, described[token])) for token in tokens
    )


def _accepted_offer(
    messages: list[dict[str, Any]],
    texts: list[int],
    tokens: list[str],
    floors: dict[str, int],
    described: dict[str, list],
    right: tuple[str, ...],
) -> int | None:
    """The latest of `texts` that names or describes one of `tokens` and that the user's next turn said yes to, when
    no later message names a `right` value: the plan a write made on no yes of its own carried out, though messages
    on other things (the payment, a failed try) came between."""
    for position in range(len(texts) - 1, -1, -1):
        index, text = texts[position], messages[texts[position]]["content"]
        if any(mentions(text, value) for value in right):
            return None
        if not _names_token(index, text, tokens, floors, described):
            continue
        reply = next((i for i in range(index + 1, len(messages)) if messages[i]["role"] == "user"), None)
        return index if reply is not None and proposal_of(messages, reply + 1) == index else None
    return None


def _offers_listed(text: str, tokens: list[str], act: tuple[str, ...]) -> bool:
    """Whether a message speaks of the act (`act`: its words) on a record it names (`tokens`): a paragraph names
    the record and the act, or the message lists the record and its last paragraph asks to go ahead with the act
    on those listed ("Would you like to proceed with canceling these reservations?"). A listing that only shows
    the record speaks of no act."""
    paragraphs = text.split("\n\n")
    if any(
        any(mentions(part, token) for token in tokens) and any(word in part.lower() for word in act)
        for part in paragraphs
    ):
        return True
    return any(mentions(text, token) for token in tokens) and any(
        (ASKS_TO_CONFIRM.search(sentence) or _OFFER.search(sentence))
        and re.search(r"\b(?:these|those|them|both|all)\b", sentence, re.I)
        and any(word in sentence.lower() for word in act)
        for sentence in sentences(paragraphs[-1])
    )


def _searched_with(messages: list[dict[str, Any]], result: int, tokens: list[str]) -> int | None:
    """The agent's call whose result at `result` brought the write's wrong values, when the agent itself put one of
    them in that call's arguments (a search on a date or an airport the user never said): the error was made there.
    Identifiers the agent looks up are no such value (looking a record up is no error)."""
    message = messages[result - 1] if result > 1 else {"role": "none"}
    if message["role"] != "assistant":
        return None
    said = [m.get("content") or "" for m in messages[1 : result - 1] if m["role"] == "user"]
    for call in calls(message):
        for key, value in call.arguments.items() if isinstance(call.arguments, dict) else ():
            if key.endswith(("_id", "_ids")) or not isinstance(value, str) or value not in tokens:
                continue
            if not any(mentions(text, value) or _says_date(text, value) for text in said):
                return result - 1
    return None


def _says_date(text: str, value: str) -> bool:
    """Whether a text gives an ISO date (2024-05-20) as people say it: "May 20", "20th of May", "5/20"."""
    found = _ISO_DATE.fullmatch(value)
    if not found:
        return False
    month, day = int(found.group(1)), int(found.group(2))
    name = calendar.month_name[month] if 1 <= month <= 12 else "?"
    spoken = (
        rf"\b{name[:3]}\w*\.? {day}(?:st|nd|rd|th)?\b|\b{day}(?:st|nd|rd|th)? (?:of )?{name[:3]}\w*|\b{month}/{day}\b"
    )
    return re.search(spoken, text, re.I) is not None


def proposal_of(messages: list[dict[str, Any]], step: int) -> int | None:
    """The agent message whose yes led to the action at `step`: the latest agent message before the latest user
    turn, when that turn is a yes; None otherwise."""
    last_user = next((i for i in range(step - 1, 0, -1) if messages[i]["role"] == "user"), None)
    if last_user is None:
        return None
    request = next((i for i in range(last_user - 1, 0, -1) if agent_text(messages[i])), None)
    answer = messages[last_user].get("content") or ""
    said = messages[request]["content"] if request is not None else None
    return request if request is not None and is_confirmation(answer, said) else None


def _hand_off(trajectory: Trajectory, domain: Domain) -> Action | None:
    """The gold solution's transfer to a human, where it makes no write: the request was beyond the agent."""
    gold = trajectory.privileged.gold_actions
    if any(domain.tool_kind(action.name) == "write" for action in gold):
        return None
    return next((action for action in gold if domain.tool_kind(action.name) == "transfer"), None)


def _pursued_at(messages: list[dict[str, Any]], step: int, action: Action) -> int | None:
    """The agent's first call whose result brought a value the write at `step` sets (a flight number, an item id:
    neither its record, a payment method nor a date), where the agent began to pursue the request."""
    own = set(targets(action))
    values = [
        value
        for value in string_values(action.kwargs)
        if value not in own and re.search(r"\d", value) and not payment_kind(value) and not _ISO_DATE.fullmatch(value)
    ]
    for index in range(2, step):
        message = messages[index]
        if message["role"] == "tool" and any(mentions(message.get("content") or "", value) for value in values):
            return index - 1 if messages[index - 1].get("tool_calls") else None
    return None


def _yes_since_write(messages: list[dict[str, Any]], step: int, domain: Domain) -> bool:
    """Whether the user said yes to an agent message after the agent's latest write before `step` that did not fail
    (the write at `step` carries on from that yes, though the user's latest turn is not one: it gave a detail asked
    for, or let a retry go on)."""
    for index in range(step - 1, 0, -1):
        message = messages[index]
        if (
            message["role"] == "assistant"
            and any(domain.tool_kind(call.name) == "write" for call in calls(message))
            and not call_failed(messages, index)
        ):
            return False
        if message["role"] == "user" and proposal_of(messages, index + 1) is not None:
            return True
    return False


def refusal(
    messages: list[dict[str, Any]], before: int, action: Action, held: frozenset[str] = frozenset()
) -> int | None:
    """The first agent message before `before`, after the user asked for what `action` does, that refuses it (names
    its target, a new item it sets, or its topic, or in one paragraph an item the write acts on or one of the item
    names `held` by its record)."""
    words = topic_words(action.name)

    def first_ask(words: tuple[str, ...]) -> int | None:
        return next(
            (
                i
                for i in range(1, before)
                if messages[i]["role"] == "user" and any(w in (messages[i]["content"] or "").lower() for w in words)
            ),
            None,
        )

    asked, specific = first_ask(words), first_ask(specific_words(action.name))
    own = targets(action) + new_item_ids(action)  # "item 9844888101 is not available" refuses the change to it
    names = item_names(messages, before, action) | held
    looked = next(
        (
            i
            for i in range(1, before)
            if messages[i]["role"] == "tool" and any(mentions(messages[i]["content"] or "", token) for token in own)
        ),
        None,
    )
    for index in _agent_texts(messages, before):
        text = messages[index]["content"]
        names_target = any(mentions(text, token) for token in own)
        if not REFUSAL.search(text) or (not names_target and (asked is None or index < asked)):
            continue  # a refusal of this record, or of this act once the user asked for it
        if specific is not None and index < specific:
            continue  # said before the user asked for this very act: it refused something else
        if looked is None or index < looked or _tried_after(messages, index, before, action, names):
            continue
        if _offers(text, words):
            continue  # it declines something else and offers this act ("I can help you modify your order")
        if _refuses_another_act(text, words):
            continue  # "items from pending orders cannot be returned": no refusal of a change to that order
        lowered = text.lower()
        if (
            any(mentions(text, token) for token in own)
            or any(word in lowered for word in words)
            or any(_refuses_item(paragraph, names) for paragraph in lowered.split("\n\n"))
        ):
            return index
    return None


_ACTS = ("cancel", "return", "refund", "exchange", "modif", "book", "upgrad", "downgrad")  # verbs of a write act


def _refuses_another_act(text: str, words: tuple[str, ...]) -> bool:
    """Whether every sentence of a message that refuses names another write act than the one of `words` (a return
    where the act is a change of items) and none of this act's words."""
    refusing = [sentence.lower() for sentence in sentences(text) if REFUSAL.search(sentence)]
    others = [act for act in _ACTS if not any(word.startswith(act) or act.startswith(word) for word in words)]
    return bool(refusing) and all(
        not any(word in sentence for word in words) and any(re.search(rf"\b{act}", sentence) for act in others)
        for sentence in refusing
    )


def held_items(domain: Domain, action: Action) -> frozenset[str]:
    """The names (lowercased) of the items the records a write acts on hold in the domain's initial database
    (hindsight, for the verdict only: a refusal may name an item of a record the agent never read)."""
    return frozenset(
        item["name"].lower()
        for record in record_ids(action)
        for item in record_items(domain, record)
        if isinstance(item.get("name"), str)
    )


def _refuses_item(paragraph: str, names: set[str]) -> bool:
    """Whether one paragraph refuses and names an item the write acts on ("a medium backpack is not available"; a
    message that says what its tools cannot show and then asks about the items refuses none of them)."""
    return bool(REFUSAL.search(paragraph)) and any(re.search(rf"\b{re.escape(name)}", paragraph) for name in names)


def item_names(messages: list[dict[str, Any]], before: int, action: Action) -> set[str]:
    """The names (lowercased) the tool results before `before` give the items a write acts on ("backpack")."""
    items = action.kwargs.get("item_ids")
    return {
        record["name"].lower()
        for item in (items if isinstance(items, list) else ())
        for record, _ in shown_records(messages, before, str(item))
        if isinstance(record.get("name"), str) and record.get("item_id") == item
    }


_OFFER = re.compile(r"\b(?:i can|i could|i'd be happy to|i would be happy to|would you like me to)\b", re.I)
_HAND_OFF = re.compile(r"\b(?:transfer|human|representative|specialist)", re.I)


_ON_CONDITION = re.compile(  # an offer that waits on what the user must bring ("if you can recall the address")
    r"\b(?:if|once|when) you (?:can |could )?(?:provide|give|share|send|recall|remember|find|locate|know|have)\b", re.I
)


def _offers(text: str, words: tuple[str, ...]) -> bool:
    """Whether a sentence of a message offers the act (`words`) and refuses nothing (an offer of a transfer offers
    no act, nor one on a condition the user must meet: "if you can recall the address, I can update it")."""
    return any(
        _OFFER.search(sentence)
        and not REFUSAL.search(sentence)
        and not _HAND_OFF.search(sentence)
        and not _ON_CONDITION.search(sentence)
        and any(word in sentence.lower() for word in words)
        for sentence in sentences(text)
    )


def _asks_to_confirm(text: str, action: Action, names: set[str]) -> bool:
    """Whether an agent message asks the user to confirm `action`'s act on its record: it names the record (or one
    of the item `names` the act changes), and a sentence that refuses nothing asks to go ahead with the act (an offer
    of a transfer is none)."""
    words = specific_words(action.name)
    return (
        any(mentions(text, token) for token in targets(action)) or any(name in text.lower() for name in names)
    ) and any(
        ASKS_TO_CONFIRM.search(sentence)
        and not REFUSAL.search(sentence)
        and not _HAND_OFF.search(sentence)
        and any(re.search(rf"\b{word}", sentence, re.I) for word in words)
        for sentence in sentences(text)
    )


def insisted(messages: list[dict[str, Any]], before: int, domain: Domain) -> int | None:
    """The agent's first reply, before `before`, after the user said it does not have a record's id (a reservation
    or order id), when the agent looks nothing up after it (a transfer to a human is no lookup): the policy lets it
    find the record from the user's profile, so requiring the id, or asking for other details instead, closes the
    only way to the change (`wrong_refusal`)."""
    for index in range(1, before):
        message = messages[index]
        if message["role"] != "user" or not _LACKS.search((message.get("content") or "").replace("\u2019", "'")):
            continue
        reply = next((i for i in range(index + 1, before) if messages[i]["role"] != "tool"), None)
        if reply is None or not is_agent_text(messages[reply]):
            continue  # the agent went to look the record up
        if not any(
            reply < step < before and domain.tool_kind(call.name) != "transfer" for step, call in tool_turns(messages)
        ):
            return reply
    return None


def refused_authentication(messages: list[dict[str, Any]], before: int, calls: list[Action]) -> int | None:
    """The agent's reply, before `before`, to the user turn by which the user had given every detail of one of
    the auth `calls` (a name and zip code), when the reply refuses instead of looking the user up and no
    authentication ever succeeds: the policy lets the agent authenticate by those details, so demanding others
    closes every change (`wrong_refusal`)."""
    names = {call.name for call in calls}
    if any(call.name in names and not call_failed(messages, step) for step, call in tool_turns(messages)):
        return None
    said = ""  # what the user said so far
    for index in range(1, before):
        if messages[index]["role"] != "user":
            continue
        said += "\n" + (messages[index]["content"] or "").lower()
        if not any(all(str(value).lower() in said for value in call.kwargs.values()) for call in calls):
            continue
        reply = next((i for i in range(index + 1, before) if messages[i]["role"] != "tool"), None)
        if reply is not None and is_agent_text(messages[reply]) and REFUSAL.search(messages[reply]["content"]):
            return reply
        return None
    return None


def _tried_after(messages: list[dict[str, Any]], start: int, before: int, action: Action, names: set[str]) -> bool:
    """Whether the agent made `action`'s act on its record between `start` and `before`, or asked the user to confirm
    it (naming its record or one of its item `names`): a refusal it went back on; the act on another record goes
    back on nothing."""
    records = record_ids(action)
    if any(
        call.name == action.name and record_ids(call.action) == records
        for step, call in tool_turns(messages)
        if start < step < before
    ):
        return True
    return any(
        _asks_to_confirm(messages[index]["content"], action, names)
        for index in _agent_texts(messages, before)
        if index > start
    )


def _number_kind(token: str) -> str:
    return "decimal" if "." in token else "integer"


def wrong_answer(
    messages: list[dict[str, Any]], before: int, output: str, others: tuple[str, ...] = ()
) -> tuple[int, str] | None:
    """The agent's first answer to a user question that gives another value of the required output's kind, or
    refuses; a reply that gives one of the `others` (the task's other required outputs), or a refusal after which the
    agent gave one, answers another question. The answer is its first message after the question, before the user's
    next question, that gives a number or refuses (messages that only ask for details come first; past the first
    reply, one that asks to confirm a change is none). A message before any tool result whose every number the
    policy states restates the policy's rules, and answers nothing about the user's records when the agent goes on
    to read them (an agent that never does answered with the policy)."""
    kind = _number_kind(output) if _NUMBER.fullmatch(output.strip()) else None
    policy = (
        set(numbers_in(messages[0].get("content") or "")) if messages and messages[0]["role"] == "system" else set()
    )
    for index in range(1, before):
        message = messages[index]
        if message["role"] != "user" or not QUESTION.search(message.get("content") or ""):
            continue
        first = True
        for reply in range(index + 1, before):
            if messages[reply]["role"] == "user" and QUESTION.search(messages[reply].get("content") or ""):
                break  # the next question
            text = agent_text(messages[reply])
            if not text:
                continue
            later, first = not first, False
            given = text.lower().replace(",", "")
            if output.lower() in given or any(other.lower() in given for other in others):
                break
            if REFUSAL.search(text):
                afterwards = "\n".join(agent_text(m) for m in messages[reply + 1 :]).lower().replace(",", "")
                if any(other.lower() in afterwards for other in others):
                    break  # it gave another required output later: the refused question was answered after all
                if INFO_QUESTION.search(message.get("content") or "") and not _IDENTITY.search(text):
                    return reply, "wrong_refusal"
                continue  # a refusal of a request to act ("can I exchange them?"), or a failed lookup of the user
            numbers = numbers_in(text)
            read_later = not any(m["role"] == "tool" for m in messages[:reply]) and any(
                m["role"] == "tool" for m in messages[reply:before]
            )
            if not numbers or (read_later and set(numbers) <= policy):
                continue
            if later and ASKS_TO_CONFIRM.search(text):
                break  # past the first reply, a request to confirm a change is no answer
            if kind is not None and any(_number_kind(n) == kind for n in numbers):
                return reply, "misread_observation"
            break
    return None


def numbers_in(text: str) -> list[str]:
    """The numbers a text gives, without a dollar sign or thousands commas ("$1,234.50" -> "1234.50")."""
    return [n.lstrip("$").replace(",", "") for n in _NUMBER.findall(text)]


def failed_write(messages: list[dict[str, Any]], said: int, domain: Domain) -> tuple[int, Action] | None:
    """The agent's latest write between the user's last turn and message `said` whose result is an error."""
    start = next((i for i in range(said - 1, 0, -1) if messages[i]["role"] == "user"), 0)
    failed = [
        (step, call.action)
        for step, call in tool_turns(messages)
        if start < step < said and domain.tool_kind(call.name) == "write" and call_failed(messages, step)
    ]
    return failed[-1] if failed else None


def _made(messages: list[dict[str, Any]], action: Action | None) -> bool:
    """Whether the agent made `action` itself (the same call, and it did not fail)."""
    return action is not None and any(
        signature(call.action) == signature(action) and not call_failed(messages, step)
        for step, call in tool_turns(messages)
    )


def _given_up_after(messages: list[dict[str, Any]], finding: Finding, domain: Domain) -> int | None:
    """The refusal of a gold write that an earlier failed try aimed at (`finding`, a `replay.write_missed_gold` at a
    write that errored), when the agent spoke of that act between them and the user answered, made no other write
    between them, and the refusal reports no failed write of its own: the agent went on pursuing the change, then
    gave it up."""
    gold = finding.expected
    if finding.signal != "replay.write_missed_gold" or gold is None or not call_failed(messages, finding.step):
        return None
    said = refusal(messages, len(messages), gold)
    if said is None or said < finding.step or failed_write(messages, said, domain) is not None:
        return None
    if any(
        finding.step < step < said and domain.tool_kind(call.name) == "write" for step, call in tool_turns(messages)
    ):
        return None  # it went on to other changes
    words = specific_words(gold.name)
    pursued = [
        index
        for index in _agent_texts(messages, said)
        if index > finding.step and any(word in messages[index]["content"].lower() for word in words)
    ]
    return said if pursued and any(m["role"] == "user" for m in messages[pursued[0] : said]) else None


def attribute(trajectory: Trajectory, findings: list[Finding], domain: Domain) -> list[Finding]:
    """The replay's critical findings moved to where each error was said (rule findings are kept as they are)."""
    messages = trajectory.messages
    required = trajectory.privileged.required_outputs
    task = domain.task(trajectory.split, trajectory.task_id)

    def others(output: str) -> tuple[str, ...]:  # the task's other required outputs
        return tuple(o for o in required if o != output)

    moved = []
    for finding in findings:
        if not finding.critical:
            moved.append(finding)
            continue
        given_up = _given_up_after(messages, finding, domain)
        if given_up is not None:  # the failed try could be mended; the refusal after it dropped the change
            finding = Finding(
                given_up,
                "said.refusal",
                "wrong_refusal",
                "critical",
                ask_to_confirm(finding.expected),
                finding.expected,
            )
        elif finding.signal in ("replay.write_off_gold", "replay.write_missed_gold"):
            action = _action_at(trajectory, finding.step)
            hand_off = _hand_off(trajectory, domain)
            pursued = (
                _pursued_at(messages, finding.step, action) if action and hand_off and not finding.expected else None
            )
            if pursued is not None:  # the task needed a hand-off: the error began where the agent pursued the request
                finding = Finding(
                    pursued, "replay.hand_off_needed", "wrong_tool", "critical", hand_off, hand_off, action
                )
            elif (
                action is not None
                and (blocked := _blocked_try(trajectory, domain, task, finding.step, action)) is not None
            ):
                finding = Finding(
                    finding.step, "replay.blocked_later_write", "wrong_sequence", "critical", blocked, blocked
                )
            elif action is not None and (
                proposal_of(messages, finding.step) is not None or _yes_since_write(messages, finding.step, domain)
            ):
                act_wrong = finding.expected is None or finding.expected.name != action.name
                topic = topic_words(action.name) if act_wrong else None
                own = set(targets(action))
                named = tuple(v for v in string_values(action.kwargs) if v not in own)
                wrong, right = wrong_tokens(action, finding.expected), tuple(right_tokens(action, finding.expected))
                if _made(messages, finding.expected):
                    right = ()  # the expected write was made too: no alternative the user was offered in its place
                act = topic_words(action.name) if wrong and set(wrong) <= own else ()  # the wrong record itself
                step = said_first(messages, finding.step, wrong, topic, named, right, act)
                proposal = proposal_of(messages, finding.step)
                if (
                    step == finding.step
                    and proposal is not None
                    and _lists_wrong_count(messages[proposal]["content"], action, finding.expected)
                ):
                    step = proposal  # the confirmation request listed the wrong count ("Total checked bags: 2")
                steered = _steered_away(messages, step, action, finding.expected) if act_wrong else None
                if steered is not None:  # the user asked for the other act in answer to the agent's word on this one
                    gold = finding.expected
                    finding = Finding(steered, "said.refusal", "wrong_refusal", "critical", ask_to_confirm(gold), gold)
                elif step != finding.step:
                    expected = ask_to_confirm(finding.expected) if finding.expected is not None else None
                    finding = Finding(
                        step, "said.proposal", finding.category, "critical", expected, finding.expected, action
                    )
        elif finding.signal == "replay.gold_write_missing" and finding.missing is not None:
            gold = finding.missing
            # the closing message itself may be the refusal
            # hindsight: what the record holds, read or not ("none of your orders include a skateboard")
            held = held_items(domain, gold)
            said = [refusal(messages, finding.step + 1, gold, held), insisted(messages, finding.step + 1, domain)]
            logins = domain.auth_calls(task)
            said.append(refused_authentication(messages, finding.step + 1, logins))
            found = min((index for index in said if index is not None), default=None)
            attempt = failed_write(messages, found, domain) if found is not None and found == said[0] else None
            charged = {f.step for f in findings if f.critical}
            if attempt is not None and attempt[1] not in trajectory.privileged.gold_actions:
                # the refusal reports the error of the agent's own write, one the gold solution never makes
                step, action = attempt
                if step in charged:
                    continue  # that write is already charged
                finding = Finding(step, "replay.write_missed_gold", write_category(action, gold), "critical", gold)
            elif found is not None and found == said[2]:  # the corrected turn looks the user up by what it gave
                user = said_by_user(messages, found).lower()
                login = next(c for c in logins if all(str(v).lower() in user for v in c.kwargs.values()))
                finding = Finding(found, "said.refusal", "wrong_refusal", "critical", login, gold)
            elif found is not None:  # the corrected turn offers the change (kept where its details were visible)
                finding = Finding(found, "said.refusal", "wrong_refusal", "critical", ask_to_confirm(gold), gold)
        elif finding.signal == "replay.output_missing":
            missing = trajectory.outcome.outputs_missing
            answers = [wrong_answer(messages, finding.step, output, others(output)) for output in missing]
            answers = [answer for answer in answers if answer is not None]
            asked = any(
                m["role"] == "user" and INFO_QUESTION.search(m["content"] or "") for m in messages[1 : finding.step]
            )
            if not answers and not asked:  # asked for only after the message charged: a wrong answer is the error
                later = [wrong_answer(messages, len(messages), output, others(output)) for output in missing]
                answers = [answer for answer in later if answer is not None and answer[0] > finding.step]
            if answers:
                step, category = min(answers)
                finding = Finding(step, "said.answer", category, "critical")
        if finding.signal in ("replay.gold_write_missing", "replay.output_missing"):
            loop = _loop_start(messages) if trajectory.outcome.termination_reason == "max_steps" else None
            if loop is not None and loop < finding.step:
                finding = Finding(loop, "replay.step_limit_loop", "redundant_action", "critical")
        moved.append(_said_false_claim(trajectory, finding, domain) or finding)
    return moved


# findings about when the agent acted, not what it did or said: a word about variants does not explain them
_ORDER_SIGNALS = (
    "replay.blocked_later_write",
    "replay.out_of_order",
    "replay.step_limit_loop",
    "replay.hand_off_needed",
)


def _blocked_try(trajectory: Trajectory, domain: Domain, task: Task, step: int, action: Action) -> Action | None:
    """The gold write the agent tried next on the record the write at `step` changed, which then failed and would
    have succeeded without that write, when the plan the user said yes to had named its act (the items changed
    before the address, which the change of items locked): the write itself is the error, whatever its proposal
    said, and the blocked one should have come first."""
    messages, records = trajectory.messages, set(record_ids(action))
    proposal = proposal_of(messages, step)
    if not records or proposal is None:
        return None
    gold = [g for g in trajectory.privileged.gold_actions if set(record_ids(g)) & records and g.name != action.name]
    for later, call in tool_turns(messages):
        if later <= step or call.name == action.name or not set(record_ids(call.action)) & records:
            continue
        blocked = next((g for g in gold if g.name == call.name), None)
        planned = blocked is not None and any(
            word in messages[proposal]["content"].lower() for word in specific_words(blocked.name)
        )
        if not planned or not call_failed(messages, later):
            return None
        others = [
            c.action for at, c in tool_turns(messages[:later]) if at != step and domain.tool_kind(c.name) == "write"
        ]  # every write made before the failed try but this one: would the try have succeeded then?
        return blocked if domain.replay([*others, call.action], task=task).calls[-1].result.ok else None
    return None


def _said_false_claim(trajectory: Trajectory, finding: Finding, domain: Domain) -> Finding | None:
    """The finding moved to an earlier message that told the user something about the variants of a product the
    error's writes act on that the database disproves ("the largest size available is 50ml")."""
    if not finding.critical or finding.signal in _ORDER_SIGNALS:
        return None
    acted = _action_at(trajectory, finding.step)
    writes = [a for a in (acted, finding.expected, finding.missing) if a is not None and a.name != RESPOND]
    gold = [a for a in trajectory.privileged.gold_actions if domain.tool_kind(a.name) == "write"]
    claim = false_claim(trajectory.messages, finding.step, products_of(domain, writes), gold)
    if claim is None:
        return None
    needed = finding.missing or finding.expected
    expected = ask_to_confirm(needed) if needed is not None and needed.name != RESPOND else None
    return Finding(claim, "said.catalogue", "ungrounded_claim", "critical", expected, needed)


_FALLS_SHORT = re.compile(r"\b(?:would|will|could|does|do) not\b|\bwon't\b|\bencountered an (?:issue|error)\b", re.I)


def _steered_away(messages: list[dict[str, Any]], said: int, action: Action, gold: Action | None) -> int | None:
    """The agent message that turned the user from the needed act to the wrong one the agent then proposed (at
    `said`): the user turn just before `said` asks for the wrong act ("then just cancel the whole order"), and the
    agent message it answers speaks of the needed act, declines it or says it falls short, and does not ask to confirm
    it ("switching all items to the cheapest would not bring the total below $1131"; "the system encountered an
    issue: shall I transfer you?")."""
    if gold is None or messages[said]["role"] != "assistant":
        return None
    asked = next((i for i in range(said - 1, 0, -1) if messages[i]["role"] == "user"), None)
    if asked is None or not any(
        word in (messages[asked]["content"] or "").lower() for word in topic_words(action.name)
    ):
        return None
    texts = _agent_texts(messages, asked)
    answered = texts[-1] if texts else None
    if answered is None or any(m["role"] == "user" for m in messages[answered + 1 : asked]):
        return None
    text = messages[answered]["content"]
    names = item_names(messages, answered, gold)
    speaks = any(word in text.lower() for word in topic_words(gold.name))
    declines = REFUSAL.search(text) or _HAND_OFF.search(text) or _FALLS_SHORT.search(text)
    return answered if speaks and declines and not _asks_to_confirm(text, gold, names) else None


def _loop_start(messages: list[dict[str, Any]], repeats: int = 3) -> int | None:
    """Where an episode the step limit ended began to loop: the first call repeating an earlier one (same tool and
    arguments) from which to the end the agent only calls tools, repeating at least `repeats` earlier calls, and
    says nothing to the user."""
    made: set[str] = set()
    repeated = []
    for step, call in tool_turns(messages):
        key = signature(call.action)
        if key in made:
            repeated.append(step)
        made.add(key)
    for start in repeated:
        tail = [m for m in messages[start:] if m["role"] == "assistant"]
        if not any(agent_text(m) for m in tail) and sum(step >= start for step in repeated) >= repeats:
            return start
    return None


def _action_at(trajectory: Trajectory, step: int) -> Action | None:
    call = first_call(trajectory.messages[step])
    return call.action if call is not None else None
