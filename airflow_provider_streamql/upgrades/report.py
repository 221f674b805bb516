"""Upgrade findings and the report the validator returns."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from ..language.expectations import Recorded
from ..language.query_shape import QueryShape
from ..language.rates import NO_LIMITS, RateLimits
from .findings import Code, Finding, UpgradeKind, Verdict, findings, worst
from .rules import RULES, Versions
from .traits import traits_of

#: the verdicts and upgrade kinds as text, in order (rising severity; KLIP-28's order)
VERDICTS = tuple(v.value for v in Verdict)
KINDS = tuple(k.value for k in UpgradeKind)


@dataclass
class Report:
    """What the validator says about replacing ``query_id``'s current version, or (with
    ``source`` set and no ``query_id``) about ``CREATE OR REPLACE STREAM|TABLE s (...)`` of a
    declared source (see :mod:`.sources`)."""

    query_id: str | None
    verdict: Verdict
    old_traits: list[str]
    new_traits: list[str]
    kinds: list[UpgradeKind]
    findings: list[Finding]
    warnings: list[dict[str, str]] = field(default_factory=list)
    #: with a dry run: {"ran", "error", "batches", "input_rows"} from Spark
    spark: dict[str, Any] | None = None
    #: the declared stream or table a source report is about
    source: str | None = None

    def add(self, finding: Finding) -> None:
        """Append ``finding``; the verdict stays the worst of the findings' verdicts."""
        self.findings.append(finding)
        self.verdict = worst(self.findings)

    @property
    def policy_note(self) -> str:
        """The error policy and rate limit changes it names ("; error policy FAIL -> LOG_AND_CONTINUE";
        "; max_files_per_batch 1 -> 3"), or ""."""
        noted = (Code.ERROR_POLICY_CHANGED, Code.RATE_LIMIT_CHANGED, Code.EXPECTATION_CHANGED)
        return "".join(f"; {f.message.split(':')[0]}" for f in self.findings if f.code in noted)

    @property
    def traits(self) -> list[str]:
        return sorted(set(self.old_traits) | set(self.new_traits), key=list(_TRAIT_ORDER).index)

    def to_dict(self) -> dict[str, Any]:
        """The report as plain values (JSON, XCom): verdicts, kinds and codes as their text."""
        data = asdict(self)
        data["traits"] = self.traits
        return json.loads(json.dumps(data))

    def render(self) -> str:
        lines = [f"{self.query_id or self.source}: {self.verdict}"]
        if self.source is None:
            lines.append(f"  traits: {', '.join(self.old_traits) or '-'} -> {', '.join(self.new_traits) or '-'}")
        lines.append(f"  kinds: {', '.join(self.kinds)}")
        lines += [f"  [{f.verdict}] {f.code} ({f.clause}): {f.message}" for f in self.findings]
        lines += [f"  warning {w['code']}: {w['message']}" for w in self.warnings]
        if self.spark is not None:
            lines.append(
                f"  spark dry run: {'ran' if self.spark['ran'] else 'refused'} "
                f"({self.spark['batches']} batches, {self.spark['input_rows']} input rows)"
                + (f": {self.spark['error']}" if self.spark["error"] else "")
            )
        return "\n".join(lines)


from .traits import TRAITS as _TRAIT_ORDER  # noqa: E402  (order for display)


def validate_upgrade(
    query_id: str,
    old: QueryShape,
    new: QueryShape,
    *,
    state_key: list[tuple[str, str]] | None = None,
    downstream: list[str] | None = None,
    policies: tuple[str | None, str | None] = (None, None),
    rates: tuple[RateLimits, RateLimits] = (NO_LIMITS, NO_LIMITS),
    expectations: tuple[Recorded | None, Recorded | None] = (None, None),
) -> Report:
    """Compare two compiled shapes (and, with ``state_key``, the aggregation state the old
    version's checkpoint records; ``policies``: the old and new version's ``on_error``, None
    for the pipeline's default; ``rates``: their rate limits; ``expectations``: theirs); never
    raises on a difference, it reports it. A difference no rule explains is REJECTED (fail
    closed)."""
    found = findings(RULES, Versions(old, new, state_key, *policies, *rates, *expectations)) or [
        Finding(
            Code.UNCHANGED,
            "query",
            UpgradeKind.TRANSPARENT,
            Verdict.IN_PLACE,
            "the new version computes the same result; the swap only restarts it",
        )
    ]
    verdict = worst(found)
    kinds = sorted({f.kind for f in found}, key=list(UpgradeKind).index)
    old_traits, new_traits = traits_of(old), traits_of(new)
    warnings = []
    if "stateful" in new_traits and any(f.kind == UpgradeKind.DATA_SELECTION for f in found):
        warnings.append(
            {
                "code": "NO_BACKFILL",
                "message": "the change applies to new input only: "
                "earlier output and the state built so far are not recomputed",
            }
        )
    elif any(f.kind in (UpgradeKind.DATA_SELECTION, UpgradeKind.SCHEMA_EVOLUTION) for f in found):
        warnings.append(
            {
                "code": "NO_BACKFILL",
                "message": "earlier output is not recomputed; "
                "only records processed after the swap follow the new version",
            }
        )
    if downstream:
        warnings.append(
            {
                "code": "CASCADING",
                "message": f"queries reading this output see the change as it happens: {', '.join(downstream)}",
            }
        )
    if new.nondeterministic:
        warnings.append(
            {
                "code": "NONDETERMINISTIC",
                "message": f"a batch re-run after a failure may differ ({', '.join(new.nondeterministic)})",
            }
        )
    return Report(query_id, verdict, old_traits, new_traits, kinds, found, warnings)
