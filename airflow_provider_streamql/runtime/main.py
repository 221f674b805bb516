"""The application spark-submit runs: ``spark-submit .../runtime/main.py --pipeline P``
is ``streamql runtime --pipeline P`` on the master spark-submit was given."""

import sys

from airflow_provider_streamql.cli import main

if __name__ == "__main__":
    sys.exit(main(["runtime", "--master", "", *sys.argv[1:]]))
