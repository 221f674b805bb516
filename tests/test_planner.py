"""The planner's tables: every statement class has a handler, and the streaming rules are
named and described. No JVM: a real SQLite catalog."""
import pytest

from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.language import deploys
from airflow_provider_streamql.language import statements as st
from airflow_provider_streamql.planner import Planner
from airflow_provider_streamql.planner.feasibility import RULES


def test_every_statement_class_has_a_handler():
    classes = {c for module in (st, deploys) for c in vars(module).values()
               if isinstance(c, type) and issubclass(c, st.Statement) and c is not st.Statement}
    assert set(Planner.HANDLERS) == classes


def families(tmp_path):
    """The planner's statement families, by the name ``HANDLERS`` knows each by."""
    engine = Engine(f"sqlite:///{tmp_path}/c.db", home=str(tmp_path))
    with engine.catalog.engine.connect() as conn:
        planner = engine._planner(conn, None)
    return {name: part for name, part in vars(planner).items() if name != "planning"}


def test_every_handler_is_a_method_of_a_family_of_the_planner(tmp_path):
    parts = families(tmp_path)
    for stmt_class, (family, method) in Planner.HANDLERS.items():
        assert callable(getattr(parts.get(family), method, None)), f"{stmt_class.__name__}: {family}.{method}"


def test_every_family_holds_the_one_planning_and_inherits_no_other(tmp_path):
    parts = families(tmp_path)
    assert {name for _, name in Planner.HANDLERS.values()} and {f for f, _ in Planner.HANDLERS.values()} <= parts.keys()
    assert len({id(part.planning) for part in parts.values()}) == 1
    assert [type(part).__name__ for part in parts.values() if type(part).__bases__ != (object,)] == []


def test_a_statement_without_a_handler_is_a_clear_error(tmp_path):
    engine = Engine(f"sqlite:///{tmp_path}/c.db", home=str(tmp_path))
    with pytest.raises(TypeError, match="no handler for Statement statements"):
        engine.run([st.Statement(text="?")])


def test_streaming_rules_are_named_and_described_in_one_line():
    assert len({rule.name for rule in RULES}) == len(RULES)
    assert all(rule.description and "\n" not in rule.description for rule in RULES)
