"""The ``streamql`` command (alone: its interactive shell, :mod:`.shell`): its parser and a
handler per subcommand; how they print is :mod:`.output`.

Exit codes: 0 ok, 1 failed, 2 usage or statement error. A wait (``wait``, ``exec --wait``,
``apply --wait``) exits 0 when what it waits for came true, 1 when it failed fast (it can no
longer come true on its own: the error says why and what to do next), 3 when it timed out.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..conditions import CaughtUp, Condition, QueriesInState
from ..engine import QUERY_COLUMNS, Engine
from ..errors import StreamQLError
from ..results import Result
from ..runtime.command import options as runtime_options
from .output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, FAILURES, Waiting, ended, printing, report, show, table

THROUGH_RETRIES = "wait through the runtime's retries of a query in ERROR instead of failing at once"


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv = ["shell", *argv]  # no command: the interactive shell, as `ksql` alone opens ksqlDB's
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except _Unreadable:
        return EXIT_USAGE
    except FAILURES as e:
        return report(e, as_json=getattr(args, "json", False))


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--catalog", help="catalog URL (default $STREAMQL_CATALOG, else SQLite under the home directory)"
    )
    common.add_argument("--home", help="directory for topics and checkpoints (default $STREAMQL_HOME or ./.streamql)")
    common.add_argument("--pipeline", help="pipeline (default $STREAMQL_PIPELINE or 'default')")
    parser = argparse.ArgumentParser(
        prog="streamql", description="ksqlDB-style persistent queries on Spark Structured Streaming"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("exec", parents=[common], help="execute StreamQL statements")
    p.add_argument("sql", nargs="?", help="statements (or use -f)")
    p.add_argument("-f", "--file", help="read statements from FILE ('-' for stdin)")
    p.add_argument("--json", action="store_true", help="print results as JSON")
    p.add_argument("--wait", action="store_true", help="return once observed state reflects each statement")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds --wait may take")
    p.add_argument("--through-retries", action="store_true", help=THROUGH_RETRIES)
    p.add_argument("--issuer", help="who issues the statements (command log)")
    p.set_defaults(handler=_exec)

    p = sub.add_parser(
        "shell", parents=[common], help="an interactive prompt, as ksqlDB's CLI (the command without arguments)"
    )
    p.add_argument("-f", "--file", help="run FILE's statements as `exec -f` does, then leave (ksql --file)")
    p.add_argument("--json", action="store_true", help="print results as JSON, a line per request")
    p.add_argument("--issuer", help="who issues the statements (command log)")
    p.set_defaults(handler=_shell)

    p = sub.add_parser("runtime", parents=[runtime_options()], help="run a Spark driver for a pipeline")
    p.set_defaults(handler=_runtime)

    p = sub.add_parser("queries", parents=[common], help="list queries and their state")
    p.add_argument(
        "--stuck-after",
        type=float,
        default=None,
        help="seconds input may wait with no batch committed before a running query is marked stuck (300)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_queries)

    p = sub.add_parser("wait", parents=[common], help="wait for a query's state or catch-up")
    p.add_argument("query_id")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--state", help="observed state to wait for (RUNNING, PAUSED, ...)")
    group.add_argument(
        "--caught-up", action="store_true", help="wait until every input record existing now is processed and committed"
    )
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--through-retries", action="store_true", help=THROUGH_RETRIES)
    p.add_argument("--json", action="store_true", help="print how the wait ended as JSON")
    p.set_defaults(handler=_wait)

    p = sub.add_parser(
        "validate",
        parents=[common],
        help="report whether CREATE OR REPLACE can upgrade a query, or change a declared source, in place",
    )
    p.add_argument(
        "sql",
        help="one CREATE [OR REPLACE] STREAM|TABLE ... AS SELECT statement, "
        "or CREATE [OR REPLACE] STREAM|TABLE s (columns) of a declared source",
    )
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument(
        "--dry-run", action="store_true", help="also run the new version on a copy of the checkpoint with local Spark"
    )
    p.add_argument("--master", default="local[*]", help="Spark master for --dry-run")
    p.set_defaults(handler=_validate)

    p = sub.add_parser(
        "plan", parents=[common], help="what applying a deploy file would change (exit 1 if it cannot be applied)"
    )
    p.add_argument("file", help="the deploy file: CREATE/ALTER/INSERT INTO ... SELECT statements")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_plan)

    p = sub.add_parser("apply", parents=[common], help="apply a deploy file: all its changes in place, or none of them")
    p.add_argument("file")
    p.add_argument("--teardown", help="a script run after the apply (TERMINATE, DROP ... DELETE TOPIC)")
    p.add_argument(
        "--plan-fingerprint",
        help="apply only if the plan is still this one (`streamql plan` prints it): refuse if the catalog changed",
    )
    p.add_argument("--json", action="store_true")
    p.add_argument("--wait", action="store_true", help="return once the changed queries run")
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--through-retries", action="store_true", help=THROUGH_RETRIES)
    p.add_argument("--issuer", help="who applies it (command log)")
    p.set_defaults(handler=_apply)

    p = sub.add_parser(
        "deploys", parents=[common], help="list the pipeline's deploys (each apply that changed something)"
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_deploys)

    p = sub.add_parser(
        "rollback",
        parents=[common],
        help="return every query a deploy changed to its version and snapshot before it, or change nothing",
    )
    p.add_argument("deploy", nargs="?", type=int, help="the deploy (default: the newest one not rolled back)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--wait", action="store_true", help="return once the queries run their versions before it")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait (for the pause, and with --wait)")
    p.add_argument("--through-retries", action="store_true", help=THROUGH_RETRIES)
    p.add_argument("--issuer", help="who rolls it back (command log)")
    p.set_defaults(handler=_rollback)

    p = sub.add_parser("runtimes", parents=[common], help="list runtimes (live ones by default)")
    p.add_argument("--all", action="store_true", help="also stopped and silent runtimes")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_runtimes)

    p = sub.add_parser(
        "health", parents=[common], help="list queries in ERROR, UNASSIGNED or making no progress (exit 1 if any)"
    )
    p.add_argument(
        "--stale-after",
        type=float,
        default=1800.0,
        help="seconds unprocessed input may wait before a query counts as stuck",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_health)

    p = sub.add_parser(
        "bad-records", parents=[common], help="list the records a query could not read, and what became of them"
    )
    p.add_argument("query_id")
    p.add_argument("--status", help="only these (PENDING, SKIPPED, LOGGED, FAILED, RETRIED, RESOLVED)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_bad_records)

    p = sub.add_parser("migrate", parents=[common], help="bring the catalog schema up to date")
    p.set_defaults(handler=_migrate)
    return parser


def _engine(args: argparse.Namespace, **kw: Any) -> Engine:
    return Engine(args.catalog, home=args.home, pipeline=args.pipeline, **kw)


class _Unreadable(Exception):
    pass


def _read(path: str) -> str:
    """The text of a statements file (``-``: stdin), which must be UTF-8; anything else is a
    usage error naming the file (and, for bytes that are not UTF-8, the first of them)."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read()
        else:
            with open(path, "rb") as f:
                data = f.read()
    except OSError as e:
        print(f"error: cannot read {path!r}: {e.strerror or e}", file=sys.stderr)
        raise _Unreadable(path) from None
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        print(
            f"error: cannot read {path!r}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})",
            file=sys.stderr,
        )
        raise _Unreadable(path) from None


def _exec(args: argparse.Namespace) -> int:
    if (args.sql is None) == (args.file is None):
        print("error: give statements as an argument or with -f FILE (not both)", file=sys.stderr)
        return EXIT_USAGE
    script = _read(args.file) if args.file else args.sql
    engine = _engine(args, issuer=args.issuer)
    results = engine.execute(script)
    code = show(engine, results, as_json=args.json)
    if code == EXIT_OK and args.wait and not printing(results):
        return _wait_for_results(engine, results, args)
    return code


def _shell(args: argparse.Namespace) -> int:
    """The interactive shell; with ``-f``, the file runs as ``exec -f`` runs it (ksqlDB's
    ``ksql --file`` runs a file and leaves)."""
    if args.file is not None:
        args.sql, args.wait = None, False
        return _exec(args)
    from .shell import Shell

    engine = _engine(args, issuer=args.issuer)
    return Shell(engine, _Console(engine, as_json=args.json), interactive=sys.stdin.isatty()).loop()


class _Console:
    """How the shell's requests run and print: as ``exec`` runs and prints them."""

    def __init__(self, engine: Engine, *, as_json: bool):
        self.engine, self.as_json = engine, as_json

    def run(self, script: str, settings: Mapping[str, str]) -> list[Result] | None:
        try:
            results = self.engine.execute(script, settings=settings)
        except FAILURES as e:
            report(e, as_json=self.as_json)
            return None
        show(self.engine, results, as_json=self.as_json)
        return results

    def read(self, path: str) -> str | None:
        try:
            return _read(path)
        except _Unreadable:
            return None

    def show(self, result: Result) -> None:
        show(self.engine, [result], as_json=self.as_json)

    def error(self, error: StreamQLError) -> None:
        report(error, as_json=self.as_json)


def _wait_for_results(engine: Engine, results, args: argparse.Namespace) -> int:
    """``--wait``: until observed state reflects each statement; exits as ``wait`` does."""
    through_retries = getattr(args, "through_retries", False)
    end = engine.results_end(results, timeout=args.timeout, through_retries=through_retries, progress=Waiting())
    return ended(end, as_json=False)


def _queries(args: argparse.Namespace) -> int:
    table(_engine(args).queries(args.pipeline, stuck_after=args.stuck_after), QUERY_COLUMNS, args.json)
    return EXIT_OK


def _wait(args: argparse.Namespace) -> int:
    """0 when what it waits for came true, 1 when it failed fast, 3 when it timed out."""
    engine = _engine(args)
    if args.caught_up:
        condition: Condition = CaughtUp(args.query_id.upper(), through_retries=args.through_retries)
    else:
        condition = QueriesInState([args.query_id], [args.state], through_retries=args.through_retries)
    poll = 0.2 if args.caught_up else 0.1
    end = engine.wait_end(condition, timeout=args.timeout, poll=poll, progress=Waiting())  # NotFoundError: 2
    return ended(end, as_json=args.json, reached=end.message if args.caught_up else args.state.upper())


def _validate(args: argparse.Namespace) -> int:
    """Exit 0 for IN_PLACE, 1 otherwise (the report says why), 2 for a bad statement."""
    engine = _engine(args)
    if args.dry_run:
        report = engine.dry_run(args.sql, master=args.master)
    else:
        report = engine.validate(args.sql)
    print(json.dumps(report.to_dict()) if args.json else report.render())
    return EXIT_OK if report.verdict == "IN_PLACE" else EXIT_FAILED


def _plan(args: argparse.Namespace) -> int:
    script = _read(args.file)  # before the engine: an unreadable file opens no catalog
    deploy_plan = _engine(args).plan(script)
    print(json.dumps(deploy_plan.to_dict()) if args.json else deploy_plan.render())
    return EXIT_FAILED if deploy_plan.of("rejected") or deploy_plan.of("replacing required") else EXIT_OK


def _apply(args: argparse.Namespace) -> int:
    # every file is read before the engine opens the catalog: an unreadable one changes nothing
    script = _read(args.file)
    teardown = _read(args.teardown) if args.teardown else None
    engine = _engine(args, issuer=args.issuer)
    deploy_plan, results = engine.apply(script, teardown=teardown, plan_fingerprint=args.plan_fingerprint)
    if args.json:
        print(json.dumps({"plan": deploy_plan.to_dict(), "results": [r.to_dict() for r in results]}, default=str))
    else:
        print(deploy_plan.render())
        print("\n".join(r.message for r in results if r.message))
    return _wait_for_results(engine, results, args) if args.wait else EXIT_OK


def _deploys(args: argparse.Namespace) -> int:
    rows = [
        {
            "deploy": d.id,
            "applied_at": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(d.applied_at)),
            "issuer": d.issuer,
            "fingerprint": d.fingerprint if args.json else d.fingerprint[:12],
            "changes": [dataclasses.asdict(c) for c in d.changes]
            if args.json
            else ", ".join(f"{c.query_id} {_change(c)}" for c in d.changes),
            "rolled_back_by": d.rolled_back_by,
        }
        for d in _engine(args).deploys()
    ]
    table(rows, ["deploy", "applied_at", "issuer", "fingerprint", "changes", "rolled_back_by"], args.json)
    return EXIT_OK


def _change(c) -> str:
    if c.version_before is None:
        return f"created v{c.version_after}"
    return f"v{c.version_before}->v{c.version_after}" if c.version_before != c.version_after else "reader"


def _rollback(args: argparse.Namespace) -> int:
    engine = _engine(args, issuer=args.issuer)
    result = engine.rollback(args.deploy, timeout=args.timeout)
    print(json.dumps(result.to_dict(), default=str) if args.json else result.render())
    return _wait_for_results(engine, [result], args) if args.wait else EXIT_OK


def _runtimes(args: argparse.Namespace) -> int:

    rows = _engine(args).runtimes(args.pipeline, live=not args.all)
    for r in rows:
        r["heartbeat_age_s"] = round(time.time() - r["heartbeat_at"], 1)
    table(rows, ["id", "pipeline", "host", "pid", "master", "heartbeat_age_s", "spark_ui_url"], args.json)
    return EXIT_OK


def _health(args: argparse.Namespace) -> int:
    from ..conditions import unhealthy_queries

    problems = unhealthy_queries(_engine(args), stale_after=args.stale_after, pipeline=args.pipeline)
    table(problems, ["query_id", "pipeline", "state", "problem"], args.json)
    return EXIT_FAILED if problems else EXIT_OK


def _bad_records(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    rows = [{**asdict(r), "position": r.position} for r in _engine(args).bad_records(args.query_id, args.status)]
    table(rows, ["status", "batch_id", "source", "position", "error", "raw", "handled_by"], args.json)
    return EXIT_OK


def _migrate(args: argparse.Namespace) -> int:
    from ..catalog import current_version, safe_url

    engine = _engine(args)
    with engine.catalog.engine.connect() as conn:
        print(f"catalog {safe_url(engine.catalog.url)} is at schema version {current_version(conn)}")
    return EXIT_OK


def _runtime(args: argparse.Namespace) -> int:
    from ..runtime.command import run

    return run(args)
