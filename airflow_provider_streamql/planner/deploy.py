"""Headless deploys: a SQL file is the desired state of a pipeline.

Planning compares the file with the catalog and says, per statement, what applying it would
do: ``create``, ``replace in place``, ``replacing required``, ``unchanged`` or ``rejected``
(with the validator's findings), and which objects of the pipeline left the file (``drop``:
listed, never dropped unless a teardown file says so). ``apply`` plans in a sandbox first,
refuses the whole file if any statement is rejected (or needs a replacing upgrade it was
not allowed), then applies every change in one catalog transaction, upstream before
downstream. Untouched queries are not restarted. Each item lists what it affects downstream,
and the plan has a fingerprint of itself and the catalog it was made against
(:mod:`.impact`): an apply given it refuses if either changed. :class:`~..engine.Engine` drives both
(``Engine.plan``/``Engine.apply``); this module only reads statements and a planner.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlglot import exp

from ..catalog.states import DesiredState
from ..errors import StateError, StreamQLError, ValidationError
from ..language import parse
from ..language import statements as st
from ..upgrades import Report, UpgradeKind, Verdict
from .impact import Impact, catalog_state, impacts, plan_fingerprint
from .planner import Planner

#: planner action -> plan action
ACTIONS = {"created": "create", "replaced": "replace in place", "altered": "replace in place", "unchanged": "unchanged"}
DECLARATIONS = (st.CreateSource, st.CreateAsSelect, st.AlterSource, st.InsertSelect, st.SetProperty)


@dataclass(frozen=True)
class Validation:
    """The validator's report on one change as a plan shows it above the findings: the
    verdict, the upgrade kinds (KLIP-28's) and the query's traits before and after."""

    verdict: Verdict
    kinds: tuple[UpgradeKind, ...] = ()
    old_traits: tuple[str, ...] = ()
    new_traits: tuple[str, ...] = ()

    @classmethod
    def of(cls, report: Report | Mapping[str, Any]) -> Validation:
        """From a report, or a report as :meth:`Report.to_dict` gives it (a planner result's)."""
        r = report.to_dict() if isinstance(report, Report) else report
        return cls(
            Verdict(r["verdict"]),
            tuple(UpgradeKind(k) for k in r["kinds"]),
            tuple(r.get("old_traits") or ()),
            tuple(r.get("new_traits") or ()),
        )

    def render(self) -> str:
        old, new = ", ".join(self.old_traits) or "-", ", ".join(self.new_traits) or "-"
        traits = f"; traits {old}" + ("" if old == new else f" -> {new}") if self.old_traits or self.new_traits else ""
        return f"validator: {self.verdict} ({', '.join(self.kinds) or 'no finding'}{traits})"


@dataclass
class PlanItem:
    """What applying one statement of the file (or the file leaving something out) does."""

    action: str  # create | replace in place | replacing required | unchanged | rejected | drop
    kind: str  # stream | table | query
    name: str  # the stream or table
    query_id: str | None = None
    statement: str | None = None
    line: int | None = None
    findings: list[str] = field(default_factory=list)
    #: the validator's verdict on a replacement (None for what is new, left out or refused before it)
    validation: Validation | None = None
    #: what the change affects downstream, and what it will not do (:mod:`.impact`)
    affects: list[Impact] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "affects": [{**asdict(a), "effect": a.effect.value} for a in self.affects]}


@dataclass
class DeployPlan:
    items: list[PlanItem]
    #: the digest of the catalog's definitions the plan was made against (:func:`.impact.catalog_state`)
    catalog_state: str = ""

    @property
    def fingerprint(self) -> str:
        """The plan's and its catalog's fingerprint: an apply given it refuses if either changed."""
        return plan_fingerprint([_fingerprinted(i) for i in self.items], self.catalog_state)

    @property
    def changes(self) -> list[PlanItem]:
        return [i for i in self.items if i.action not in ("unchanged", "drop")]

    def of(self, action: str) -> list[PlanItem]:
        return [i for i in self.items if i.action == action]

    def to_dict(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint,
            "items": [i.to_dict() for i in self.items],
            "summary": {
                a: len(self.of(a))
                for a in ("create", "replace in place", "replacing required", "unchanged", "rejected", "drop")
            },
        }

    def render(self) -> str:
        lines = []
        for i in self.items:
            where = f" (line {i.line})" if i.line else ""
            query = f" [{i.query_id}]" if i.query_id else ""
            lines.append(f"{i.action:<20} {i.kind} {i.name}{query}{where}")
            lines += [f"{'':<21}{i.validation.render()}"] if i.validation else []
            lines += [f"{'':<21}{f}" for f in i.findings]
            lines += [f"{'':<21}-> {a.render()}" for a in i.affects]
        lines.append(f"plan fingerprint: {self.fingerprint}")
        summary = self.to_dict()["summary"]
        lines.append("; ".join(f"{n} {a}" for a, n in summary.items() if n) or "nothing in the file")
        return "\n".join(lines)


def declarations(script: str) -> list[st.Statement]:
    """The statements of a deploy file, upstream before downstream, each CREATE read as
    CREATE OR REPLACE; anything that is not a declaration is refused."""
    return _declarative(parse(script))


def plan_script(planner: Planner, statements: list[st.Statement], pipeline: str) -> DeployPlan:
    """What applying ``statements`` would do, planned on ``planner`` (over a connection that
    writes nothing). Items come in the statements' order, then what left the file."""
    planner.skip_unchanged = True
    state = catalog_state(planner.snapshot)  # before the statements change the planner's copy
    items = [_plan_one(planner, stmt) for stmt in statements]
    items += _left_out(planner, statements, pipeline)
    for item in items:  # against the catalog as the whole file leaves it
        item.affects = impacts(planner.snapshot, item.action, item.name, item.query_id)
    return DeployPlan(items, state)


def _fingerprinted(item: PlanItem) -> dict[str, Any]:
    """An item without what follows from the rest (its impacts, the validator's verdict)."""
    return {k: v for k, v in asdict(item).items() if k not in ("affects", "validation")}


def to_apply(statements: list[st.Statement], deploy_plan: DeployPlan) -> list[st.Statement]:
    """The statements that change something; raises (naming every one) if any statement is
    rejected or needs a replacing upgrade, so that nothing of the file is applied."""
    refused = deploy_plan.of("rejected") + deploy_plan.of("replacing required")
    if refused:
        first = refused[0]
        error = ValidationError if first.action == "rejected" else StateError
        raise error(
            f"nothing applied: {len(refused)} statement(s) cannot be applied in place; "
            + "; ".join(f"{i.kind} {i.name} is {i.action}: {', '.join(i.findings)}" for i in refused)
            + (
                ""
                if first.action == "rejected"
                else " (rebuild it with Engine.replace or ReplaceQueryOperator(mode='replacing'))"
            ),
            line=first.line,
        )
    # (the plan's items go on past the statements with what left the file)
    todo = [
        s
        for s, item in zip(statements, deploy_plan.items, strict=False)
        if isinstance(s, st.SetProperty) or item.action not in ("unchanged", "drop")
    ]
    # settings alone change nothing
    return todo if any(not isinstance(s, st.SetProperty) for s in todo) else []


def _plan_one(planner: Planner, stmt: st.Statement) -> PlanItem:
    name = str(getattr(stmt, "name", None) or getattr(stmt, "target", ""))
    kind = getattr(stmt, "kind", "STREAM").lower()
    item = PlanItem("create", kind, name, statement=stmt.text.strip(), line=stmt.line)
    if isinstance(stmt, st.SetProperty):
        planner.plan(stmt)
        return PlanItem("unchanged", "setting", stmt.key, statement=stmt.text.strip(), line=stmt.line)
    try:
        step = planner.plan(stmt)
    except (ValidationError, StateError) as e:
        item.action, item.findings = "rejected", [e.message]
        existing = planner.snapshot.sources.get(name)
        if isinstance(stmt, st.CreateSource) and existing is not None and not existing.writer_query:
            try:  # a source change the validator refuses: its findings, one per difference
                _old, report, _versions = planner.check_replace_source(stmt)
            except StreamQLError:
                return item
            item.findings = [f"{f.code}: {f.message}" for f in report.findings if f.verdict != "IN_PLACE"]
            item.validation = Validation.of(report)
            return item
        if isinstance(stmt, st.CreateAsSelect) and existing is not None and existing.writer_query:
            try:
                current, report, _new, _sink = planner.check_replace(stmt)
            except StreamQLError:
                return item
            item.query_id = current.id
            item.action = "replacing required" if report.verdict == "REPLACING_REQUIRED" else "rejected"
            item.findings = [f"{f.code}: {f.message}" for f in report.findings if f.verdict != "IN_PLACE"]
            item.validation = Validation.of(report)
        return item
    result = step.result
    item.action = ACTIONS.get(result.action or "created", "create")
    item.query_id = result.query_id
    if result.report:
        item.findings = [f"{f['code']}: {f['message']}" for f in result.report["findings"]]
        item.validation = Validation.of(result.report)
    return item


def _left_out(planner: Planner, statements: list[st.Statement], pipeline: str) -> list[PlanItem]:
    """Streams, tables and queries of the pipeline that the file no longer declares."""
    named = {getattr(s, "name", None) for s in statements} | {getattr(s, "target", None) for s in statements}
    items = []
    for q in sorted(planner.snapshot.queries.values(), key=lambda q: q.seq):
        if (
            q.pipeline == pipeline
            and q.desired_state != DesiredState.TERMINATED
            and q.sink not in named
            and q.kind != "INSERT"
        ):
            items.append(
                PlanItem(
                    "drop",
                    planner.snapshot.sources[q.sink].kind.lower(),
                    q.sink,
                    q.id,
                    findings=["no longer in the file; a teardown file can TERMINATE and DROP it"],
                )
            )
    readers = {
        n for q in planner.snapshot.queries.values() if q.desired_state != DesiredState.TERMINATED for n in q.sources
    }
    for src in sorted(planner.snapshot.sources.values(), key=lambda s: s.name):
        if (
            src.writer_query is None
            and src.name not in named
            and src.name not in readers
            and "dead_letter_of" not in src.properties
        ):
            items.append(
                PlanItem(
                    "drop", src.kind.lower(), src.name, findings=["no longer in the file; a teardown file can DROP it"]
                )
            )
    return items


def _declarative(statements: list[st.Statement]) -> list[st.Statement]:
    """The file's statements, upstream before downstream, each CREATE read as CREATE OR
    REPLACE (the file says what should exist). Anything else is not a declaration."""
    for s in statements:
        if not isinstance(s, DECLARATIONS):
            raise ValidationError(
                f"a deploy file declares streams, tables and queries; "
                f"{type(s).__name__} belongs in a teardown file or streamql exec",
                line=s.line,
                col=s.col,
                text=s.text.strip()[:120],
            )
        if isinstance(s, (st.CreateSource, st.CreateAsSelect)):
            s.or_replace = True
    defined = {getattr(s, "name", None): s for s in statements if isinstance(s, (st.CreateSource, st.CreateAsSelect))}
    ordered: list[st.Statement] = []
    visiting: set[int] = set()

    def visit(s: st.Statement) -> None:
        if any(s is o for o in ordered):
            return
        if id(s) in visiting:
            raise ValidationError(
                f"the file's queries read each other in a cycle ({getattr(s, 'name', '')})", line=s.line, col=s.col
            )
        visiting.add(id(s))
        for name in _reads(s):
            if name in defined and defined[name] is not s:
                visit(defined[name])
        visiting.discard(id(s))
        ordered.append(s)

    for s in statements:
        visit(s)
    return ordered


def _reads(stmt: st.Statement) -> list[str]:
    select = getattr(stmt, "select", None)
    names = [t.name.upper() for t in select.find_all(exp.Table)] if select is not None else []
    if isinstance(stmt, st.AlterSource):
        names.append(stmt.name)
    return names
