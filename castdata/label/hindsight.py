"""The hindsight labeler: a verdict for every agent action of an episode, from its outcome and the rules.

- Successful episode: every action is valid, unless a rule flags it (invalid, minor).
- Failed episode: the earliest critical replay finding is the first critical error (invalid, critical);
  actions before it are valid unless a rule flags them; actions after it are marked `after_first_error`
  (their context is already doomed). A failed episode with no critical finding is unexplained: its
  unflagged actions are `uncertain`.
- Episodes ended by infrastructure errors, or by the simulated user failing, say nothing about the agent, and
  imported episodes castdata's environment does not reproduce cannot be scored: they are skipped (`judge`
  returns None).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from castdata.envs import Domain, load_domain
from castdata.label.attribution import attribute
from castdata.label.fault import episode_fault, user_choice, with_counterparts
from castdata.label.findings import Finding
from castdata.label.replay import replay_findings
from castdata.label.rules import rule_findings
from castdata.messages import agent_actions
from castdata.records import Action, Trajectory

SKIPPED_TERMINATIONS = ("infrastructure_error", "user_error")


@dataclass
class Judgement:
    """The hindsight verdict on one agent action."""

    step: int
    action: Action
    verdict: str
    severity: str
    findings: list[Finding] = field(default_factory=list)
    first_critical_error: bool = False
    after_first_error: bool = False

    @property
    def categories(self) -> list[str]:
        """Categories of the findings, critical ones first, without repeats."""
        ordered = sorted(self.findings, key=lambda f: not f.critical)
        return list(dict.fromkeys(f.category for f in ordered))


@dataclass
class EpisodeJudgement:
    """All verdicts of one episode."""

    trajectory: Trajectory
    judgements: list[Judgement]
    success: bool
    first_error: int | None  # message index of the first critical error
    consistent: bool  # the replay reproduced every observation and the recorded outcome
    fault: str | None = None  # a failure the simulated user or the task caused (`castdata.label.fault`)

    @property
    def explained(self) -> bool:
        """A success, or a failure whose first critical error (or the user's or the task's fault) was found."""
        return self.success or self.first_error is not None or self.fault is not None


def judge(trajectory: Trajectory, domain: Domain | None = None) -> EpisodeJudgement | None:
    """Judge every agent action of an episode; None for a skipped episode."""
    if trajectory.outcome.termination_reason in SKIPPED_TERMINATIONS or not trajectory.counts_for_pass_k:
        return None  # says nothing about the agent, or (an imported episode that does not reproduce) cannot be scored
    domain = domain or load_domain(trajectory.domain)
    actions = agent_actions(trajectory.messages)
    success = trajectory.outcome.reward == 1.0
    findings = rule_findings(trajectory, domain)
    consistent, first_error, fault = True, None, None
    if not success and actions:
        deviating = {f.step for f in findings if f.signal == "rule.unconfirmed_details"}
        unconfirmed = frozenset(f.step for f in findings if f.signal == "rule.no_confirmation")
        result = replay_findings(trajectory, domain, actions[-1], deviating, unconfirmed)
        consistent = result.consistent
        choices = [user_choice(trajectory, domain, finding) for finding in result.findings]
        choices = with_counterparts(result.findings, choices)
        fault = episode_fault(trajectory, domain, result.findings, choices)
        if fault is None:
            agents = [f for f, choice in zip(result.findings, choices) if choice is None]
            critical = attribute(trajectory, agents, domain)  # writes the user chose are not the agent's errors
            findings += critical
            first_error = min((f.step for f in critical), default=None)
    by_step: dict[int, list[Finding]] = {}
    for finding in findings:
        by_step.setdefault(finding.step, []).append(finding)
    judgements = []
    for step, action in actions:
        found = by_step.get(step, [])
        if found:
            verdict = "invalid"
        else:
            verdict = "valid" if success or first_error is not None or fault else "uncertain"
        severity = "critical" if any(f.critical for f in found) else "minor" if found else "none"
        judgements.append(
            Judgement(
                step=step,
                action=action,
                verdict=verdict,
                severity=severity,
                findings=found,
                first_critical_error=step == first_error,
                after_first_error=first_error is not None and step > first_error,
            )
        )
    return EpisodeJudgement(trajectory, judgements, success, first_error, consistent, fault)
