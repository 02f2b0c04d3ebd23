"""Rule-based critic models served by the loopback chat server: structured critiques as a critic writes them."""

from __future__ import annotations

import json
import re
from typing import Any

from castdata.builders import critic as critic_rows
from castdata.envs import load_domain


def critique(verdict: str, assessment: str = "Judged from the conversation.") -> dict[str, Any]:
    """A structured critique as a critic writes it."""
    return {
        "categories": [] if verdict == "valid" else ["wrong_argument"],
        "severity": "none" if verdict == "valid" else "critical",
        "policy_refs": [],
        "evidence": [],
        "rationale": {
            "observed": "The agent proposed an action.",
            "required": "Follow the policy.",
            "assessment": assessment,
        },
        "expected_action": None,
        "verdict": verdict,
    }


_PROPOSED = re.compile(r"Proposed action \[\d+\]:\nagent: (\w+)\((.*)\)\Z", re.S)


def confirmed_writes_only(body: dict[str, Any]) -> dict[str, Any]:
    """A rule-based critic model: a write is invalid unless the agent stated exactly these arguments before."""
    assert body["response_format"]["type"] == "json_schema"
    assert body["messages"][0]["content"].startswith(critic_rows.INSTRUCTIONS)
    prompt = body["messages"][1]["content"]
    found = _PROPOSED.search(prompt)
    write = found is not None and found.group(1) in load_domain("retail").catalog.write_tools
    verdict = "invalid" if write and found.group(2) not in prompt[: found.start()] else "valid"
    return {"content": json.dumps(critique(verdict, "These are not the details the user confirmed."))}
