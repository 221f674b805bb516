"""The docs site builds with MkDocs in strict mode: no broken links, no warnings."""
import os
import subprocess
import sys

from .conftest import REPO


def test_the_docs_site_builds_without_warnings(tmp_path):
    mkdocs = os.path.join(os.path.dirname(sys.executable), "mkdocs")
    result = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    pages = {p for p in os.listdir(tmp_path / "site")}
    assert {"index.html", "language", "upgrades", "operators", "ui", "operations", "deployment"} <= pages
