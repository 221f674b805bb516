"""What executing a statement returns: a message, an optional table, and what to wait for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Result:
    """The outcome of one statement.

    ``waits`` lists (query_id, observed state) pairs that show the statement took effect;
    ``streamql exec --wait`` waits for them.
    """

    statement: str
    message: str = ""
    query_id: str | None = None
    columns: list[str] = field(default_factory=list)
    rows: list[list[Any]] = field(default_factory=list)
    waits: list[tuple[str, str]] = field(default_factory=list)
    #: for CREATE OR REPLACE: the validator's report and the new version
    report: dict[str, Any] | None = None
    version: int | None = None
    #: for CREATE, ALTER and INSERT INTO ... SELECT: created, replaced, altered or unchanged
    action: str | None = None
    #: figures a statement reports besides its table (DIFF: inputs compared, rows per side)
    details: dict[str, Any] = field(default_factory=dict)
    #: for a push query: what it follows, resolved once (a ``storage.push.PushPlan``, which
    #: ``Engine.follow_push`` reads on with); not part of :meth:`to_dict`
    push_plan: Any = field(default=None, repr=False, compare=False)
    #: for DESCRIBE <source> EXTENDED and SHOW QUERIES EXTENDED: the typed description
    #: (``views.descriptions.SourceDescription``, or a list of ``QueryDescription``) whose
    #: ksqlDB layout is the message; :meth:`to_dict` gives it as ``description``
    description: Any = field(default=None, repr=False)

    @property
    def query(self) -> str:
        """The query the statement created or changed; ValueError for a statement that has none."""
        if self.query_id is None:
            raise ValueError(f"{self.statement.strip()[:80]!r} names no query")
        return self.query_id

    @property
    def query_version(self) -> tuple[str, int]:
        """(query, the version the statement made); ValueError for a statement that made none."""
        if self.version is None:
            raise ValueError(f"{self.statement.strip()[:80]!r} made no version of a query")
        return self.query, self.version

    def to_dict(self) -> dict[str, Any]:
        return {
            "statement": self.statement,
            "message": self.message,
            "query_id": self.query_id,
            "columns": self.columns,
            "rows": self.rows,
            "waits": [list(w) for w in self.waits],
            "report": self.report,
            "version": self.version,
            "action": self.action,
            "details": self.details,
            **({"description": _described(self.description)} if self.description is not None else {}),
        }

    def render(self) -> str:
        """Human-readable text: the message, then the table if there is one (a description's
        message is its whole layout, its fields' table within it)."""
        if self.description is not None:
            return self.message
        out = [self.message] if self.message else []
        if self.columns:
            cells = [[cell(v) for v in row] for row in self.rows]
            widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(self.columns)]
            line = lambda values: " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()
            out += [line(self.columns), "-+-".join("-" * w for w in widths)]
            out += [line(r) for r in cells]
            out.append(f"({len(self.rows)} row{'s' if len(self.rows) != 1 else ''})")
        return "\n".join(out)


def _described(description: Any) -> Any:
    """A description (or a list of them) as JSON-ready values."""
    if isinstance(description, list):
        return [d.to_dict() for d in description]
    return description.to_dict()


def cell(value: Any) -> str:
    """A value as a table shows it (NULL as ``null``, a float shortest)."""
    if value is None:
        return "null"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
