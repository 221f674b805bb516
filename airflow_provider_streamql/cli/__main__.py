"""``python -m airflow_provider_streamql.cli``: the ``streamql`` command."""

import sys

from . import main

sys.exit(main())
