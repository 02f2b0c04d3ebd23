"""Labeling statistics (`labels/stats.json`, printed by `castdata label`).

Labels per verdict, severity and category; the agent turn of each first critical error; verifier
rejections by reason; for scripted runs, agreement with the injected mistakes (does the first critical
error fall on the first injected outcome-breaking mistake, with the mistake's category; is each injected
mistake flagged, with its category; which signals flag steps with no injected mistake); agreement
with Monte-Carlo labels where labels carry them, and the continuations run for them; the teacher's requests
and cache hits.
"""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.table import Table

from castdata.label.acts import TARGET_KEYS
from castdata.label.attribution import proposal_of
from castdata.label.hindsight import EpisodeJudgement
from castdata.label.schema import Label
from castdata.label.verify import Rejection
from castdata.label.writers import Written
from castdata.messages import call_failed, first_call
from castdata.records import Trajectory

MISMATCHES_KEPT = 20
_RECORD_KEYS = tuple(key for key in TARGET_KEYS if key not in ("user_id", "patient_id"))
# The category a label should carry for each kind of injected mistake (castdata.models.scripted).
KIND_CATEGORY = {
    "wrong_argument": "wrong_argument",
    "wrong_tool": "wrong_tool",
    "no_confirmation": "missing_confirmation",
    "before_auth": "auth_violation",
    "premature_end": "premature_termination",
    "missing_output": "missed_required_action",
    "two_tool_calls": "policy_violation",
    "misread_observation": "misread_observation",
    "wrong_refusal": "wrong_refusal",
    "partial_plan": "missed_required_action",
    "wrong_order": "wrong_sequence",
    "guessed_id": "ungrounded_claim",
    "malformed_call": "schema_error",
    "empty_reply": "miscommunication",
    "needless_transfer": "unnecessary_transfer",
    "repeated_lookup": "redundant_action",
}
USER_KINDS = ("user_deviation",)  # the simulated user's mistakes: the labeler should blame no agent action


def _made_good(trajectory: Trajectory, step: int) -> bool:
    """Whether a tool call that went through, after the failed write at `step`, acted on its record (the order,
    reservation, appointment or line it was for; not the user, whose every call names it): the failure was made
    good."""

    def records(message: dict) -> set[str]:
        call = first_call(message)
        return {str(call.arguments[key]) for key in _RECORD_KEYS if key in call.arguments} if call else set()

    wanted = records(trajectory.messages[step])
    return any(
        wanted & records(message) and _changed_by(trajectory, later)
        for later, message in enumerate(trajectory.messages)
        if later > step and message["role"] == "assistant"
    )


def _changed_by(trajectory: Trajectory, step: int) -> bool:
    """Whether the action at `step` is a tool call that succeeded (a write that went through)."""
    return bool(trajectory.messages[step].get("tool_calls")) and not call_failed(trajectory.messages, step)


def _said_at(trajectory: Trajectory, step: int) -> set[int]:
    """Where an injected mistake at `step` shows: its own turn, and the confirmation request that proposed it (the
    labeler charges a wrong write the user said yes to where it was proposed)."""
    proposal = proposal_of(trajectory.messages, step)
    return {step} if proposal is None else {step, proposal}


class LabelStats:
    """Counters filled while a run is labeled."""

    def __init__(self, run_dir: str) -> None:
        self.run_dir = run_dir
        self.read = 0
        self.skipped: Counter[str] = Counter()
        self.episodes: Counter[str] = Counter()
        self.verdicts: Counter[str] = Counter()
        self.severities: Counter[str] = Counter()
        self.categories: Counter[str] = Counter()
        self.flags: Counter[str] = Counter()
        self.first_error_turn: Counter[int] = Counter()
        self.checked = 0
        self.rejected: Counter[str] = Counter()  # programmatic rationales, by reason code
        self.rejected_labels = 0
        self.writer: Counter[str] = Counter()
        self.writer_reasons: Counter[str] = Counter()
        self.scripted = 0
        self.injected: Counter[str] = Counter()
        self.kinds: dict[str, Counter[str]] = {}
        self.false_alarms: Counter[str] = Counter()
        self.mismatches: list[dict] = []
        self.mc: Counter[str] = Counter()

    def skip(self, trajectory: Trajectory) -> None:
        """Count an episode that was not labeled."""
        self.read += 1
        reproduced = trajectory.imported is None or trajectory.imported.reproduced
        self.skipped[trajectory.outcome.termination_reason if reproduced else "not_reproduced"] += 1

    def add(self, episode: EpisodeJudgement, labels: list[Label]) -> None:
        """Count one labeled episode and its labels."""
        self.read += 1
        self.episodes["succeeded" if episode.success else "failed"] += 1
        if not episode.success:
            self.episodes["failed_explained" if episode.explained else "failed_unexplained"] += 1
        if not episode.consistent:
            self.episodes["replay_inconsistent"] += 1
        for turn, label in enumerate(labels, start=1):
            self.verdicts[label.verdict] += 1
            self.severities[label.severity] += 1
            self.categories.update(label.categories)
            self.flags["first_critical_error"] += label.first_critical_error
            self.flags["after_first_error"] += label.after_first_error
            self.flags["with_expected_action"] += label.expected_action is not None
            self.flags["with_evidence"] += bool(label.evidence)
            if label.first_critical_error:
                self.first_error_turn[turn] += 1
            if label.label_source.mc_success_before is not None:
                self.mc["labels"] += 1
                self.mc["agree"] += bool(label.label_source.agreement)
        if episode.trajectory.agent.backend == "scripted":
            self._injected(episode, labels)

    def _injected(self, episode: EpisodeJudgement, labels: list[Label]) -> None:
        trajectory = episode.trajectory
        self.scripted += 1
        by_step = {label.step: label for label in labels}
        executed = [m for m in trajectory.injected_mistakes if not m.intercepted]  # a critic stopped the others
        said = {m.step: _said_at(trajectory, m.step) for m in executed}
        injected_steps = {step for steps in said.values() for step in steps}
        for mistake in executed:
            kind = self.kinds.setdefault(mistake.kind, Counter())
            kind["injected"] += 1
            if mistake.kind in USER_KINDS:
                kind["flagged"] += episode.fault is not None
                kind["category_match"] += episode.fault is not None
                continue
            found = [by_step[step] for step in said[mistake.step] if step in by_step]
            kind["flagged"] += any(label.verdict == "invalid" for label in found)
            kind["category_match"] += any(KIND_CATEGORY.get(mistake.kind) in label.categories for label in found)
        for label in labels:  # flags the outcome can judge (not after the first error) where nothing was injected
            if label.verdict == "invalid" and not label.after_first_error and label.step not in injected_steps:
                self.false_alarms.update(label.label_source.signals)
        if episode.success:
            return
        if episode.fault == "fault.gold_against_policy":
            # the scripted truth takes the gold solution as right; here the policy forbids it, and the label says so
            self.injected["gold_against_policy"] += 1
            return
        breaking = [m for m in executed if m.outcome_breaking]
        if not breaking:
            self.injected["failed_without_breaking"] += 1
            return
        # a failed write that changed nothing can still be made good: where a later call went through on its record
        # and a later breaking mistake is a write that did change the records, that one is the first critical error
        later_write = any(m.step > min(b.step for b in breaking) and _changed_by(trajectory, m.step) for m in breaking)
        lasting = [
            m
            for m in breaking
            if not (later_write and call_failed(trajectory.messages, m.step) and _made_good(trajectory, m.step))
        ]
        first = min(lasting or breaking, key=lambda m: m.step)
        self.injected["failed_with_breaking"] += 1
        per_kind = self.kinds.setdefault(first.kind, Counter())
        per_kind["first_breaking"] += 1
        if first.kind in USER_KINDS and episode.fault is not None and episode.first_error is None:
            self.injected["first_error_matches"] += 1  # the user's fault, and no agent action blamed
            self.injected["first_error_category_matches"] += 1
            per_kind["first_error_matches"] += 1
        elif episode.first_error in said[first.step]:
            self.injected["first_error_matches"] += 1
            self.injected["first_error_category_matches"] += (
                KIND_CATEGORY.get(first.kind) in by_step[episode.first_error].categories
            )
            per_kind["first_error_matches"] += 1
        elif len(self.mismatches) < MISMATCHES_KEPT:
            found = by_step.get(episode.first_error) if episode.first_error is not None else None
            self.mismatches.append(
                {
                    "trajectory_id": trajectory.id,
                    "injected": {"kind": first.kind, "step": first.step, "detail": first.detail},
                    "found": {
                        "step": episode.first_error,
                        "categories": found.categories if found else [],
                        "signals": found.label_source.signals if found else [],
                    },
                }
            )

    def verified(self, rejections: list[Rejection]) -> None:
        """Count the verification of one programmatic rationale."""
        self.checked += 1
        self.rejected_labels += bool(rejections)
        self.rejected.update(r.code for r in rejections)

    def written(self, written: Written) -> None:
        """Count one writer (teacher) result: its tries, rejections and whether the draft was kept."""
        self.writer["labels"] += 1
        self.writer["tries"] += len(written.rejections) + (not written.fallback)
        self.writer["rejected_tries"] += len(written.rejections)
        self.writer["fallbacks"] += written.fallback
        for rejections in written.rejections:
            self.writer_reasons.update(r.code for r in rejections)

    def to_dict(self) -> dict:
        """Everything, as plain data (`labels/stats.json`)."""
        total = sum(self.verdicts.values())
        breaking = self.injected["failed_with_breaking"]
        return {
            "run_dir": self.run_dir,
            "trajectories": {
                "read": self.read,
                "labeled": self.read - sum(self.skipped.values()),
                "skipped": dict(self.skipped),
            },
            "episodes": dict(self.episodes),
            "labels": {
                "total": total,
                "verdicts": dict(self.verdicts),
                "severities": dict(self.severities),
                "categories": dict(self.categories.most_common()),
                **dict(self.flags),
            },
            "first_error_turn": {str(turn): n for turn, n in sorted(self.first_error_turn.items())},
            "verifier": {
                "programmatic": {
                    "checked": self.checked,
                    "rejected": self.rejected_labels,
                    "reasons": dict(self.rejected),
                },
                "writer": {**dict(self.writer), "reasons": dict(self.writer_reasons)} if self.writer else None,
            },
            "injected": None
            if not self.scripted
            else {
                "scripted_episodes": self.scripted,
                "failed_with_breaking": breaking,
                "failed_without_breaking": self.injected["failed_without_breaking"],
                "gold_against_policy": self.injected["gold_against_policy"],
                "first_error_matches": self.injected["first_error_matches"],
                "first_error_agreement": round(self.injected["first_error_matches"] / breaking, 4)
                if breaking
                else None,
                "first_error_category_matches": self.injected["first_error_category_matches"],
                "mismatches": self.mismatches,
                "kinds": {kind: dict(counts) for kind, counts in sorted(self.kinds.items())},
                "false_alarms_by_signal": dict(self.false_alarms.most_common()),
            },
            "mc": {
                "labels": self.mc["labels"],
                "agreement": round(self.mc["agree"] / self.mc["labels"], 4) if self.mc["labels"] else None,
                "rollouts": self.mc["rollouts"],
            },
        }


def _counts_table(title: str, counts: dict, total: int | None = None) -> Table:
    table = Table(title=title)
    table.add_column("name")
    table.add_column("count", justify="right")
    for name, n in counts.items():
        table.add_row(str(name), f"{n}" + (f" ({n / total:.1%})" if total else ""))
    return table


def print_stats(stats: dict) -> None:
    """Print `castdata label`'s statistics as tables."""
    console = Console()
    trajectories, labels = stats["trajectories"], stats["labels"]
    skipped = ", ".join(f"{k}={v}" for k, v in trajectories["skipped"].items()) or "none"
    console.print(
        f"labeled {trajectories['labeled']} of {trajectories['read']} episodes in {stats['run_dir']} (skipped: {skipped}); {labels['total']} labels"
    )
    console.print(_counts_table("episodes", stats["episodes"]))
    console.print(_counts_table("verdicts", labels["verdicts"], labels["total"]))
    console.print(_counts_table("categories (invalid labels)", labels["categories"]))
    histogram = ", ".join(f"{turn}: {n}" for turn, n in stats["first_error_turn"].items()) or "none"
    console.print(f"first critical errors by agent turn (turn: episodes): {histogram}")
    programmatic = stats["verifier"]["programmatic"]
    console.print(
        f"verifier: {programmatic['rejected']} of {programmatic['checked']} programmatic rationales rejected {programmatic['reasons'] or ''}"
    )
    if stats["verifier"]["writer"]:
        console.print(
            _counts_table(
                "writer (teacher) rationales", {k: v for k, v in stats["verifier"]["writer"].items() if k != "reasons"}
            )
        )
        console.print(_counts_table("writer rejections by reason", stats["verifier"]["writer"]["reasons"]))
    injected = stats["injected"]
    if injected:
        agreement = injected["first_error_agreement"]
        console.print(
            f"injected mistakes: first critical error = first outcome-breaking mistake in {injected['first_error_matches']} of "
            f"{injected['failed_with_breaking']} failed episodes"
            + (f" ({agreement:.1%})" if agreement is not None else "")
        )
        kinds = Table(title="injected mistakes by kind")
        for column in ("kind", "injected", "flagged", "category match"):
            kinds.add_column(column, justify="left" if column == "kind" else "right")
        for kind, counts in injected["kinds"].items():
            kinds.add_row(
                kind,
                str(counts.get("injected", 0)),
                str(counts.get("flagged", 0)),
                str(counts.get("category_match", 0)),
            )
        console.print(kinds)
    intercepted = stats.get("interceptions") or {}
    if intercepted.get("total"):
        console.print(
            f"interceptions: {intercepted['total']}, {intercepted['confirmed']} confirmed (proposal invalid, revision "
            f"valid); proposals {intercepted['proposals']}, revisions {intercepted['revisions']}"
        )
    if stats["mc"]["labels"]:
        mc = stats["mc"]
        console.print(
            f"Monte-Carlo labels: {mc['labels']}, agreement with hindsight {mc['agreement']:.1%} ({mc['rollouts']} continuations)"
        )
