"""Policy clauses: each domain's policy text cut into citable clauses with stable ids.

A clause is one top-level bullet (with its continuation lines and sub-bullets) or one plain paragraph.
Its id is `{domain}.{section}.{n}`:

- `section` is the path of the headings above the clause, each slugged (lowercase, runs of anything but
  letters and digits become `-`) and joined with `.`; the document title (a first `#` heading) is left
  out, and clauses before the first section heading are in section `intro`;
- `n` counts the clauses directly under that heading, from 1.

E.g. retail's "An order can only be cancelled if its status is 'pending'..." is `retail.cancel-pending-order.1`.
Ids depend on the policy text only, so they are the same in every run; the table records the policy's
sha256 (`policy_sha256`) so a dataset can tell which policy version its ids refer to. Each clause's
`text` is an exact substring of the policy (the bullet marker left out), so a quote of a clause is a quote
of the system prompt the agent saw.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass

from pydantic import BaseModel

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^[-*+]\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")

# What the rule checks cite: the first clause (in document order) matching the pattern.
TOPICS = {
    "confirmation": re.compile(r"explicit (?:\w+ )?confirmation", re.I),
    "one_tool_call": re.compile(r"one tool call at a time", re.I),
    "transfer": re.compile(r"transfer .* if and only if", re.I),
    "authentication": re.compile(r"authenticate|obtain the user id|verify identity", re.I),
    "cancellation": re.compile(r"can be cancelled within 24 hours", re.I),
    "compensation": re.compile(r"do not proactively offer", re.I),
    "flight_change": re.compile(r"without changing the origin, destination,? and trip type", re.I),
    "checked_bags": re.compile(r"checked bag allowance", re.I),
    "item_swap": re.compile(r"each item can be (?:modified|exchanged) to an available new item", re.I),
    "payment": re.compile(r"user (?:must|needs to) provide (?:a|one) [\w ]*payment", re.I),
}


class Clause(BaseModel):
    """One citable clause; a row of `labels/policy_clauses.jsonl`."""

    clause_id: str
    domain: str
    section: str  # heading path as written, joined with " > "
    text: str
    policy_sha256: str


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"


@dataclass
class _Open:
    start: int
    end: int


def segment(domain: str, policy: str) -> list[Clause]:
    """Cut a policy into clauses with stable ids (see the module docstring)."""
    sha = hashlib.sha256(policy.encode("utf-8")).hexdigest()
    clauses: list[Clause] = []
    headings: list[tuple[int, str]] = []  # (level, title)
    title_level = None
    counts: dict[str, int] = {}
    current: _Open | None = None

    def close() -> None:
        nonlocal current
        if current is None:
            return
        raw = policy[current.start : current.end]
        marker = _BULLET.match(raw)
        text = raw[marker.end() if marker else 0 :].rstrip()
        path = [title for _, title in headings]
        section_id = ".".join(_slug(t) for t in path) or "intro"
        counts[section_id] = counts.get(section_id, 0) + 1
        clauses.append(
            Clause(
                clause_id=f"{domain}.{section_id}.{counts[section_id]}",
                domain=domain,
                section=" > ".join(path) or "intro",
                text=text,
                policy_sha256=sha,
            )
        )
        current = None

    offset = 0
    for line in policy.splitlines(keepends=True):
        start, offset = offset, offset + len(line)
        stripped = line.strip()
        heading = _HEADING.match(stripped)
        if heading:
            close()
            level = len(heading.group(1))
            if title_level is None and not clauses and not headings and level == 1:
                title_level = level  # the document title: not part of section paths
                continue
            headings = [(lvl, t) for lvl, t in headings if lvl < level] + [(level, heading.group(2))]
        elif not stripped:
            close()
        elif _BULLET.match(line):  # a top-level bullet starts a clause; indented ones continue it
            close()
            current = _Open(start + len(line) - len(line.lstrip()), start + len(line.rstrip()))
        elif current is not None:
            current.end = start + len(line.rstrip())
        else:
            current = _Open(start + len(line) - len(line.lstrip()), start + len(line.rstrip()))
    close()
    return clauses


class ClauseTable:
    """A domain's clauses, by id, with the look-ups rationales need."""

    def __init__(self, domain: str, policy: str) -> None:
        self.domain = domain
        self.policy = policy
        self.clauses = segment(domain, policy)
        self.by_id = {clause.clause_id: clause for clause in self.clauses}

    def about(self, topic: str) -> tuple[Clause, str] | None:
        """The first clause on a `TOPICS` topic and the sentence of it that matched."""
        pattern = TOPICS[topic]
        for clause in self.clauses:
            if pattern.search(clause.text):
                return clause, next(s for s in _sentences(clause.text) if pattern.search(s))
        return None

    def for_tool(self, tool: str) -> tuple[Clause, str] | None:
        """The first clause of the section whose heading path best matches a tool name, and its first sentence.

        Words are compared by their first five letters ("cancel_appointment" ~ "Cancelling Appointments");
        a section needs two words in common, else there is no such clause.
        """
        words = {w[:5] for w in tool.lower().split("_")}
        best, best_score = None, 1
        for clause in self.clauses:
            score = len(words & {w[:5] for w in re.findall(r"[a-z]+", clause.section.lower())})
            if score > best_score:
                best, best_score = clause, score
        if best is None:
            return None
        return best, _sentences(best.text)[0]


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text) if s]


@functools.cache
def clause_table(domain: str) -> ClauseTable:
    """The clause table of a castdata domain (its policy as `castdata.envs` loads it), built once per process."""
    from castdata.envs import load_domain

    return ClauseTable(domain, load_domain(domain).policy)
