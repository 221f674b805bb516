"""docs/ksqldb.md claims only what the planner accepts: every ``sql`` block on the page is
run, in order, against one catalog (no runtime: statements are planned and committed)."""

import pathlib
import re

from airflow_provider_streamql.engine import Engine

PAGE = pathlib.Path(__file__).parent.parent / "docs" / "ksqldb.md"
BLOCKS = re.findall(r"^```sql\n(.*?)^```", PAGE.read_text(), flags=re.S | re.M)


def test_the_page_has_examples():
    assert len(BLOCKS) >= 2


def test_every_supported_example_is_accepted(tmp_path):
    engine = Engine(f"sqlite:///{tmp_path}/catalog.db", home=str(tmp_path), issuer="test")
    try:
        for block in BLOCKS:
            try:
                engine.execute(block)
            except Exception as e:
                raise AssertionError(f"docs/ksqldb.md example refused: {block.strip()!r}: {e}") from None
    finally:
        engine.close()
