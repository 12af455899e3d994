"""What a session's reporting has gathered so far (controller side): item records, verdicts, problems, errors;
and the one way an output file is written (a failure is an error line, the other outputs still come)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_topsail.items import ItemRecord
    from pytest_topsail.regression import Verdict


@dataclass(eq=False)
class Results:
    records: list[ItemRecord] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    by_nodeid: dict[str, tuple[ItemRecord, list[Verdict]]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # shown; the session does not fail for them
    errors: list[str] = field(default_factory=list)  # the session fails
    failing: list[str] = field(default_factory=list)  # regressions of suites with fail_on_regression
    outputs: dict[str, str] = field(default_factory=dict)  # name -> path of each output written
    summary: dict[str, Any] = field(default_factory=dict)
    interrupted: str | None = None  # why the run stopped early (SIGINT, SIGTERM, a failure with -x), if it did
    expected: int = 0  # items selected to run

    def add(self, record: ItemRecord, verdicts: list[Verdict]) -> None:
        self.records.append(record)
        self.verdicts.extend(verdicts)
        self.by_nodeid[record.nodeid] = (record, verdicts)

    def all_problems(self) -> list[str]:
        return list(dict.fromkeys(self.problems + self.errors))

    def write(self, path: Path, text: str) -> bool:
        """Write one output file; a failure is one error line (the session fails), the other outputs still come."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as error:
            self.errors.append(f"{path}: cannot be written ({error.strerror or error})")
            return False
        return True
