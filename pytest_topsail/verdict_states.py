"""The one vocabulary of KPI verdict states, used by every output: terminal, HTML report, junit, teamcity,
``verdicts.json``, ``regression_summary.yaml``, the history store and the docs (docs/kpis-and-regressions.md).

A state is written everywhere by its value (``insufficient_history``), never by a synonym; a test checks each
output against this module. Add a state here (with its meaning) and every output and the docs follow.
"""

from __future__ import annotations

from enum import StrEnum


class State(StrEnum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    ACCEPTED = "accepted"
    INSUFFICIENT_HISTORY = "insufficient_history"
    NO_HISTORY = "no_history"
    IGNORED = "ignored"

    @property
    def meaning(self) -> str:
        return MEANINGS[self]

    @property
    def judged(self) -> bool:
        """Compared with a baseline of enough points (regression, improvement, accepted)."""
        return self in JUDGED


MEANINGS: dict[State, str] = {
    State.REGRESSION: "a change point at the current value, beyond the noise floor, in the bad direction",
    State.IMPROVEMENT: "the same in the good direction; never a failure",
    State.ACCEPTED: "no change point at the current value, or a change within the noise floor",
    State.INSUFFICIENT_HISTORY: "1 to N-1 comparable earlier runs (N = regression.min_history, default 5): "
                                "the change is shown, not judged",
    State.NO_HISTORY: "no comparable earlier run: not judged",
    State.IGNORED: "the KPI is informational (declared ignored_for_regression, a tail or rate of too small a "
                   "sample, or a machine_bound change measured under a CPU contention unlike its baseline's) or its "
                   "measurement says it cannot be trusted (untrusted, e.g. a saturated load client: kept out of "
                   "later baselines too): shown with why, never judged",
}

JUDGED = frozenset({State.REGRESSION, State.IMPROVEMENT, State.ACCEPTED})

# the order in which outputs list verdicts: what needs attention first
ORDER: dict[str, int] = {state.value: number for number, state in enumerate(State)}


def state_of(name: str) -> State:
    """The state named ``name`` (a value of an older history record included); ValueError otherwise."""
    return State(name)
