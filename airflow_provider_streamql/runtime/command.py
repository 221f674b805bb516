"""The runtime's command line: ``streamql runtime`` (the CLI takes its options from here and
hands it the arguments) and the application spark-submit runs (``runtime/main.py``), which
is ``streamql runtime`` on the master spark-submit was given.

Only :mod:`argparse` is imported when this module loads: the CLI builds its parser from
:func:`options` without loading Spark."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import NoReturn

from ..errors import STATEMENT_ERRORS, CatalogError, StreamQLError

#: exit codes, as the ``streamql`` command's: ok, failed, usage or statement error
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def options() -> argparse.ArgumentParser:
    """Every option of a runtime, as a parent parser (``add_help=False``): where its
    catalog, home and pipeline are (the options every ``streamql`` command takes), and how
    it runs."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--catalog", help="catalog URL (default $STREAMQL_CATALOG, else SQLite under the home directory)")
    p.add_argument("--home", help="directory for topics and checkpoints (default $STREAMQL_HOME or ./.streamql)")
    p.add_argument("--pipeline", help="pipeline (default $STREAMQL_PIPELINE or 'default')")
    p.add_argument(
        "--master",
        default="local[*]",
        help="Spark master (default local[*]; '' under spark-submit: the master it was given)",
    )
    p.add_argument("--interval", type=float, default=0.5, help="reconcile interval, seconds")
    p.add_argument("--lease-ttl", type=float, default=10.0, help="query lease lifetime, seconds")
    p.add_argument(
        "--workers",
        type=_positive_int,
        default=8,
        help="queries started, stopped or swapped at once in a reconcile pass (default 8)",
    )
    p.add_argument(
        "--on-error",
        default=None,  # the Runtime's default (catalog.states.DEFAULT_ON_ERROR), not loaded here
        type=str.upper,
        choices=("FAIL", "LOG_AND_CONTINUE", "PAUSE"),
        help="what a record a query cannot read does, for queries that set no on_error (default "
        "LOG_AND_CONTINUE: to its dead-letter stream, as ksqlDB's processing log)",
    )
    p.add_argument(
        "--readiness-window",
        type=float,
        default=30.0,
        help="seconds a new version has to fail and be rolled back automatically "
        "after an in-place upgrade (it is ready earlier once it commits a batch)",
    )
    p.add_argument(
        "--metrics-port",
        type=_port,
        default=None,
        help="serve the pipeline's queries in Prometheus' format at http://<host>:PORT/metrics (default: off)",
    )
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark configuration (repeatable)")
    return p


def run(args: argparse.Namespace) -> int:
    """Serve ``args.pipeline`` until SIGTERM or SIGINT, then end the process (it returns only
    an error found before the runtime serves). A ``--conf`` that cannot be taken is a usage
    error, refused before the home, the catalog or Spark is touched."""
    from ..catalog import Catalog, default_home, default_pipeline
    from ..storage.kafka_properties import secret_in_argv
    from . import kafka
    from .driver import Runtime
    from .session import build_session

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    conf = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"error: --conf wants KEY=VALUE, got {item!r}", file=sys.stderr)
            return EXIT_USAGE
        if secret_in_argv(key):
            print(f"error: --conf {secret_in_argv(key)}", file=sys.stderr)
            return EXIT_USAGE
        conf[key] = value
    kafka.load_properties()  # at start: a file that cannot be read stops the runtime here
    home = os.path.abspath(args.home) if args.home else default_home()
    os.makedirs(home, exist_ok=True)
    catalog = Catalog(args.catalog, home=home)
    pipeline = args.pipeline or default_pipeline()
    # the session is most of a runtime's start: say so while it is waited for, and how long it took
    log = logging.getLogger("streamql.runtime")
    log.info("starting Spark (master %s): its JVM and session take a few seconds", args.master or "of spark-submit")
    started = time.monotonic()
    spark = build_session(args.master, f"streamql-{pipeline}", conf)
    log.info("Spark started in %.1f s (application %s)", time.monotonic() - started, spark.sparkContext.applicationId)
    kafka.check_conf(spark)  # warns of Kafka secrets in spark-defaults.conf
    runtime = Runtime(
        catalog,
        pipeline,
        spark,
        interval=args.interval,
        lease_ttl=args.lease_ttl,
        readiness_window=args.readiness_window,
        on_error=args.on_error,
        workers=args.workers,
        metrics_port=args.metrics_port,
    )
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: runtime.stop())
    runtime.run()
    try:
        spark.stop()
    except Exception as e:  # its JVM went first (SIGTERM sent to the whole process group)
        log.warning("stopping Spark: %s", kafka.error_report(e))
    _exit_served(EXIT_OK)


def _exit_served(code: int) -> NoReturn:
    """End a runtime's process once it has shut down (its queries stopped, its leases
    released), without the interpreter's finalization. There, Py4J's connections log from
    their finalizers while daemon threads (Py4J's, the lease keeper) are frozen wherever they
    were: one frozen inside a log handler holds its lock for good, and the process hung on it
    after a SIGTERM (seen under spark-submit: the runtime gone from the catalog, its process
    waiting in ``Handler.acquire`` for ever). Logs and output are flushed first."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """spark-submit's application: the runtime on the master spark-submit was given
    (``--master ''``), its errors reported as ``streamql runtime`` reports them."""
    parser = argparse.ArgumentParser(prog="streamql-runtime", parents=[options()])
    args = parser.parse_args(["--master", "", *(sys.argv[1:] if argv is None else argv)])
    try:
        return run(args)
    except STATEMENT_ERRORS as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (StreamQLError, CatalogError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_FAILED


def _port(text: str) -> int:
    """A TCP port for argparse: 0 (any free one) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a port is a whole number from 0 to 65535, not {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a whole number from 0 to 65535, not {text!r}")
    return port


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number of at least 1, not {text!r}")
    return int(text)
