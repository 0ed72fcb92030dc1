"""One precheck's outcome and the whole report, in dmctl ``check-task``'s JSON shape."""
from __future__ import annotations

from dataclasses import dataclass, field

SUCCESS, WARN, FAIL = "success", "warn", "fail"
_RANK = {SUCCESS: 0, WARN: 1, FAIL: 2}


@dataclass
class CheckItem:
    """One check (DM's ``Result``): its state is the worst of its problems."""
    name: str
    desc: str
    state: str = SUCCESS
    errors: list[tuple[str, str]] = field(default_factory=list)     # (severity, short_error)
    instructions: list[str] = field(default_factory=list)
    extra: str = ""

    def problem(self, severity: str, message: str, instruction: str = "") -> "CheckItem":
        """Record one problem; the item's state becomes the worse of the two."""
        self.errors.append((severity, message))
        if _RANK[severity] > _RANK[self.state]:
            self.state = severity
        if instruction and instruction not in self.instructions:
            self.instructions.append(instruction)
        return self

    def to_json(self, ident: int) -> dict:
        return {"id": ident, "name": self.name, "desc": self.desc, "state": self.state,
                "errors": [{"severity": s, "short_error": m} for s, m in self.errors],
                "instruction": " ".join(self.instructions), "extra": self.extra}


@dataclass
class CheckReport:
    items: list[CheckItem] = field(default_factory=list)

    def count(self, state: str) -> int:
        return sum(1 for i in self.items if i.state == state)

    @property
    def passed(self) -> bool:
        """No check failed (warnings do not stop a task, as in DM)."""
        return self.count(FAIL) == 0

    def to_json(self) -> dict:
        """DM's ``checkResult``; unlike DM, successful items are listed too (with state
        ``success``), so the report shows what was checked."""
        return {"summary": {"passed": self.passed, "total": len(self.items), "successful": self.count(SUCCESS),
                            "failed": self.count(FAIL), "warning": self.count(WARN)},
                "results": [i.to_json(n + 1) for n, i in enumerate(self.items)]}

    def problems(self, state: str) -> list[str]:
        """One line per item in ``state``: name, problems, fix."""
        out = []
        for i in self.items:
            if i.state == state:
                text = f"{i.name}" + (f" ({i.extra})" if i.extra else "") + ": " + "; ".join(m for _, m in i.errors)
                out.append(text + (f" -- fix: {' '.join(i.instructions)}" if i.instructions else ""))
        return out

    def summary_line(self) -> str:
        return (f"pre-check {'passed' if self.passed else 'failed'}: {len(self.items)} checks, "
                f"{self.count(SUCCESS)} successful, {self.count(WARN)} warning, {self.count(FAIL)} failed")
