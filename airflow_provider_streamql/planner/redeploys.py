"""Whether a statement redeploys what a query runs: the same plan with the same settings
and output, or the same statement as written (a later release may plan an unchanged
statement otherwise). A redeploy of an unchanged script must leave its queries alone.
"""

from __future__ import annotations

from ..catalog import QueryInfo, SourceInfo
from ..errors import StreamQLError
from ..language import statements as st
from ..language.dialect import DIALECT
from ..language.expectations import SETTINGS as EXPECTATION
from ..language.rates import RateLimit
from .planning import column_tuples


def same_query(
    current: QueryInfo, old_sink: SourceInfo, new: QueryInfo, sink: SourceInfo, stmt: st.CreateAsSelect
) -> bool:
    """The new definition runs what ``current`` runs, with the same settings, and writes the
    same output: the same plan, or the same statement as written (a later release may plan
    an unchanged statement otherwise, e.g. a HAVING that retracts or a 24-hour default grace:
    redeploying the script must not replace the query). The shape is not compared: it is
    what the validator derives from these, and a trait added to it in a later release must not
    make every query look changed."""
    if (new.settings, column_tuples(sink.columns), sink.properties) != (
        current.settings,
        column_tuples(old_sink.columns),
        old_sink.properties,
    ):
        return False
    if new.plan == current.plan:
        return True
    try:
        old = current.statement()
    except StreamQLError:  # a statement this release no longer reads is no match
        return False
    return isinstance(old, st.CreateAsSelect) and as_written(old) == as_written(stmt)


def written_alike(current: QueryInfo, stmt: st.CreateAsSelect | st.InsertSelect, settings: dict[str, str]) -> bool:
    """``current`` was created by the statement ``stmt`` is, as written, in the session
    settings the script has now (a redeploy of an unchanged script)."""
    try:
        old = current.statement()
    except StreamQLError:  # a statement this release no longer reads is no match
        return False
    # the query's own settings a statement or ALTER QUERY gives (not the session's) aside
    own = {"on_error", *RateLimit, *EXPECTATION}
    given, now = ({k: v for k, v in s.items() if k not in own} for s in (current.settings, settings))
    return type(old) is type(stmt) and as_written(old) == as_written(stmt) and given == now


def as_written(stmt: st.Statement) -> tuple:
    """What a CREATE ... AS SELECT or INSERT INTO ... SELECT says, whatever its spelling
    (case, spaces, OR REPLACE)."""
    select = stmt.select.sql(dialect=DIALECT, normalize=True).lower() if hasattr(stmt, "select") else None
    return (
        getattr(stmt, "kind", None),
        getattr(stmt, "name", None) or getattr(stmt, "target", None),
        getattr(stmt, "properties", {}),
        select,
        getattr(stmt, "emit", None) or "CHANGES",
        stmt.window,
        stmt.withins,
        stmt.partition_by,
    )
