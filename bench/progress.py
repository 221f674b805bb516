"""A listener of Spark's streaming progress for the benchmarks: each progress event handed on
as its JSON dict, the other events ignored (a benchmark that needs one overrides it)."""

from __future__ import annotations

import json

from pyspark.sql.streaming import StreamingQueryListener


class ProgressEvents(StreamingQueryListener):
    def progress(self, progress: dict) -> None:
        """One query progress (``StreamingQueryProgress`` as JSON)."""
        raise NotImplementedError

    def onQueryProgress(self, event):
        self.progress(json.loads(event.progress.json))

    def onQueryStarted(self, event):
        pass

    def onQueryIdle(self, event):
        pass

    def onQueryTerminated(self, event):
        pass
