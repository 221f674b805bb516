"""Statements -> checked changes to the catalog.

``Planner.plan`` validates one statement against a :class:`Snapshot` and applies its effect
to that snapshot, so the next statement of the script is checked against the catalog as it
would be. Nothing touches the database until every statement of a script has been planned.

The planner is its statement families put together (:mod:`.sources`, :mod:`.queries`,
:mod:`.control`, :mod:`.reads`, :mod:`.snapshots`, :mod:`.shadows`, all on :mod:`.base`);
:attr:`Planner.HANDLERS` says which handler plans which statement class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from ..language import statements as st
from .base import Step
from .control import ControlStatements
from .queries import PersistentQueries
from .reads import Reads
from .shadows import ShadowStatements
from .snapshots import SnapshotStatements
from .sources import SourceStatements


class Planner(SourceStatements, ShadowStatements, ControlStatements, Reads, SnapshotStatements):
    #: statement class -> its handler, called as ``handler(planner, stmt)``
    HANDLERS: ClassVar[dict[type[st.Statement], Callable[[Any, Any], Step]]] = {
        st.CreateSource: SourceStatements._create_source,
        st.AlterSource: SourceStatements._alter_source,
        st.DropSource: SourceStatements._drop_source,
        st.CreateAsSelect: ShadowStatements._create_as_select_or_shadow,
        st.InsertSelect: PersistentQueries._insert_select,
        st.QueryControl: ControlStatements._query_control,
        st.SetProperty: ControlStatements._set_property,
        st.InsertValues: Reads._insert_values,
        st.PullQuery: Reads._pull_query,
        st.Show: Reads._show,
        st.Describe: Reads._describe,
        st.Explain: Reads._explain,
        st.TakeSnapshot: SnapshotStatements._take_snapshot,
        st.RestoreQuery: SnapshotStatements._restore,
        st.ShadowAction: ShadowStatements._shadow_action,
        st.DiffShadow: ShadowStatements._diff,
    }

    def plan(self, stmt: st.Statement) -> Step:
        handler = self.HANDLERS.get(type(stmt))
        if handler is None:
            raise TypeError(
                f"the planner has no handler for {type(stmt).__name__} statements "
                f"(it plans {', '.join(t.__name__ for t in self.HANDLERS)})"
            )
        step = handler(self, stmt)
        step.log = stmt.writes and step.result.action != "unchanged"
        return step
