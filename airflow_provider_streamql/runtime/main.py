"""The application spark-submit runs: ``spark-submit .../runtime/main.py --pipeline P``
is ``streamql runtime --pipeline P`` on the master spark-submit was given
(:func:`~airflow_provider_streamql.runtime.command.main`)."""

import sys

from airflow_provider_streamql.runtime.command import main

if __name__ == "__main__":
    sys.exit(main())
