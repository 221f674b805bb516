"""Statements -> checked changes to the catalog.

``Planner.plan`` validates one statement against a :class:`Snapshot` and applies its effect
to that snapshot, so the next statement of the script is checked against the catalog as it
would be. Nothing touches the database until every statement of a script has been planned.

The planner is its statement families (:mod:`.sources`, :mod:`.queries`, :mod:`.control`,
:mod:`.reads`, :mod:`.push`, :mod:`.snapshots`, :mod:`.shadows`, :mod:`.deploy_history`) put
together: each holds the one
:class:`~.planning.Planning` of the script and, by name, the families it uses (sources and
shadows make new versions of queries through ``queries``); none inherits another.
:attr:`Planner.HANDLERS` says which family's method plans which statement class.
"""

from __future__ import annotations

from typing import ClassVar

from ..catalog import Snapshot
from ..language import statements as st
from ..language.deploys import RecordDeploy, RollbackDeploy
from .control import ControlStatements
from .deploy_history import DeployStatements
from .planning import Planning
from .push import PushQueries
from .queries import PersistentQueries, Replacement
from .rates import RateLimitStatements
from .reads import Reads
from .shadows import ShadowStatements
from .snapshots import SnapshotStatements
from .sources import SourceStatements
from .step import Step


class Planner:
    """The statement families of one script's :class:`Planning`, and :meth:`plan`, which
    hands each statement to its family's handler."""

    #: statement class -> (family, method): planned by ``planner.<family>.<method>(stmt)``
    HANDLERS: ClassVar[dict[type[st.Statement], tuple[str, str]]] = {
        st.CreateSource: ("sources", "create_source"),
        st.AlterSource: ("sources", "alter_source"),
        st.DropSource: ("sources", "drop_source"),
        st.CreateAsSelect: ("shadows", "create_as_select_or_shadow"),
        st.InsertSelect: ("queries", "insert_select"),
        st.QueryControl: ("control", "query_control"),
        st.SetProperty: ("control", "set_property"),
        st.InsertValues: ("reads", "insert_values"),
        st.PullQuery: ("reads", "pull_query"),
        st.PushQuery: ("push", "push_query"),
        st.Show: ("reads", "show"),
        st.Describe: ("reads", "describe"),
        st.Explain: ("reads", "explain"),
        st.PrintTopic: ("reads", "print_topic"),
        st.TakeSnapshot: ("snapshots", "take_snapshot"),
        st.RestoreQuery: ("snapshots", "restore"),
        st.RestoreToTime: ("snapshots", "restore_to_time"),
        st.ShadowAction: ("shadows", "shadow_action"),
        st.DiffShadow: ("shadows", "diff"),
        st.AlterQuery: ("rates", "alter_query"),
        RecordDeploy: ("deploys", "record_deploy"),
        RollbackDeploy: ("deploys", "rollback_deploy"),
    }

    def __init__(self, planning: Planning):
        self.planning = planning
        self.queries = PersistentQueries(planning)
        self.sources = SourceStatements(planning, self.queries)
        self.shadows = ShadowStatements(planning, self.queries)
        self.control = ControlStatements(planning)
        self.reads = Reads(planning)
        self.push = PushQueries(planning)
        self.snapshots = SnapshotStatements(planning)
        self.rates = RateLimitStatements(planning)
        self.deploys = DeployStatements(planning, self.snapshots)

    def plan(self, stmt: st.Statement) -> Step:
        handler = self.HANDLERS.get(type(stmt))
        if handler is None:
            raise TypeError(
                f"the planner has no handler for {type(stmt).__name__} statements "
                f"(it plans {', '.join(t.__name__ for t in self.HANDLERS)})"
            )
        family, method = handler
        step: Step = getattr(getattr(self, family), method)(stmt)
        step.log = stmt.writes and step.result.action != "unchanged"
        return step

    # -- what the engine and deploy plans ask of the planning and its families --------------
    @property
    def snapshot(self) -> Snapshot:
        """The catalog as the statements planned so far leave it."""
        return self.planning.snapshot

    @property
    def skip_unchanged(self) -> bool:
        return self.planning.skip_unchanged

    @skip_unchanged.setter
    def skip_unchanged(self, value: bool) -> None:
        self.planning.skip_unchanged = value

    @property
    def issuer(self) -> str:
        return self.planning.issuer

    @issuer.setter
    def issuer(self, value: str) -> None:
        self.planning.issuer = value

    def check_replace(self, stmt: st.CreateAsSelect) -> Replacement:
        """The validator's verdict on replacing a query (:meth:`.queries.PersistentQueries.check_replace`)."""
        return self.queries.check_replace(stmt)

    def check_replace_source(self, stmt: st.CreateSource):
        """The validator's verdict on replacing a declared source
        (:meth:`.sources.SourceStatements.check_replace_source`)."""
        return self.sources.check_replace_source(stmt)
