"""A stand-in rationale writer (`castdata.label.writers.RationaleWriter`) for the verifier and labeler tests."""

from __future__ import annotations

from castdata.label.schema import Evidence


class PlantingWriter:
    """A stand-in teacher: plants a fault in its first `bad` tries, then writes a clean rationale."""

    name = "planting"

    def __init__(self, bad: int, fault: str = "future") -> None:
        self.bad, self.fault, self.calls, self.feedback = bad, fault, 0, []

    async def write(self, trajectory, draft, feedback):
        self.calls += 1
        self.feedback.append([r.code for r in feedback])
        if self.calls <= self.bad:
            if self.fault == "unparseable":
                raise ValueError("model output is not JSON")
            return draft.model_copy(
                update={"evidence": [Evidence(step=draft.step + 1, source="tool_result", quote="the order")]}
            )
        rationale = draft.rationale.model_copy(
            update={"assessment": "Invalid: the agent cancelled an order the user did not ask about."}
        )
        return draft.model_copy(
            update={"rationale": rationale, "label_source": draft.label_source.model_copy(update={"method": "teacher"})}
        )
