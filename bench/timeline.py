"""Parts of the runtime timed where they run (bench/upgrade_parts.py, bench/resume_all_parts.py):
each function named is wrapped, in its module or class, to record its (start, end) wall-clock
times and the thread that ran it."""

from __future__ import annotations

import collections
import functools
import threading
import time


class Timeline:
    """Wraps each ``parts`` entry (name -> (owner, attribute)) to record its runs."""

    def __init__(self, parts: dict[str, tuple[object, str]]) -> None:
        self.events: list[tuple[float, float, str, int]] = []
        for name, (owner, attribute) in parts.items():
            setattr(owner, attribute, self._timed(name, getattr(owner, attribute)))

    def _timed(self, name, function):
        @functools.wraps(function)
        def timed(*args, **kwargs):
            began = time.time()
            try:
                return function(*args, **kwargs)
            finally:
                self.events.append((began, time.time(), name, threading.get_ident()))

        return timed

    def first_after(self, start: float, origin: float) -> dict[str, list[float]]:
        """Each part's first run that began at ``start`` or later: [began, ended] relative to
        ``origin`` (a reconcile pass of another query, or an idle one, may come later)."""
        found: dict[str, list[float]] = {}
        for began, ended, name, _ in sorted(self.events):
            if began >= start and name not in found:
                found[name] = [round(began - origin, 3), round(ended - origin, 3)]
        return found

    def totals(self, origin: float) -> dict[str, dict]:
        """Each part over all its runs: how many, their time summed over the threads, its mean,
        and the span from the first run's start to the last one's end (relative to ``origin``)."""
        runs: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
        for began, ended, name, _ in self.events:
            runs[name].append((began, ended))
        return {
            name: {
                "runs": len(times),
                "sum_s": round(sum(b - a for a, b in times), 3),
                "mean_ms": round(1000 * sum(b - a for a, b in times) / len(times), 1),
                "span_s": [round(min(a for a, _ in times) - origin, 3), round(max(b for _, b in times) - origin, 3)],
            }
            for name, times in sorted(runs.items(), key=lambda item: min(a for a, _ in item[1]))
        }
