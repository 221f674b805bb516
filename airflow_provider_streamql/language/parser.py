"""Text -> typed statements.

The statement shapes (CREATE STREAM ... WITH, PAUSE, SHOW QUERIES, ...) are recognised on
sqlglot's token stream; every SELECT body is handed to sqlglot's Spark parser whole.
"""

# long module: the whole statement grammar is one recursive-descent parser over one token
# cursor, as sqlglot's parser is; split by statement, each part would need the cursor's
# private state and the grammar could no longer be read in one place.
from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, NoReturn

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from ..errors import ParseError
from .dialect import DIALECT
from .limits import Limits, current
from .names import PLAIN_NAME, name_problem
from .rates import RateLimit, rate_limit_named, rate_problem
from .script import split_tokens, start_col
from .shapes import mark_subscripts, name_fields
from .starting import timestamp_millis
from .statements import (
    MAX_COUNT,
    MAX_STATE_ROWS,
    READY_WINDOW,
    READY_WITHIN,
    AlterQuery,
    AlterSource,
    Column,
    CreateAsSelect,
    CreateSource,
    Describe,
    DiffShadow,
    DropSource,
    Explain,
    InsertSelect,
    InsertValues,
    PrintTopic,
    PullQuery,
    PushQuery,
    QueryControl,
    ReadyGate,
    RestoreQuery,
    RestoreToTime,
    SetProperty,
    ShadowAction,
    Show,
    Statement,
    TakeSnapshot,
    WindowSpec,
    Within,
    ready_gate_problem,
    retention_problem,
)
from .types import UNSUPPORTED, SqlType, TypeProblem, parse_type
from .values import check_value

NAME_TOKENS = {TokenType.VAR, TokenType.IDENTIFIER}
EMIT_MODES = ("CHANGES", "FINAL")
WINDOW_KINDS = ("TUMBLING", "HOPPING", "SESSION")
TIME_UNITS = {"MILLISECOND": 0.001, "SECOND": 1, "MINUTE": 60, "HOUR": 3600, "DAY": 86400}
#: the longest duration (WINDOW, WITHIN, GRACE PERIOD), seconds: Spark holds an interval in
#: microseconds in a 64-bit long and adds it to event times (up to year 9999, 2.5e17 us), so
#: 100,000 days (8.64e18 us, about 273 years) is as long as it can compute with
MAX_DURATION_SECONDS = 100_000 * 86400
SHOW_TARGETS = ("STREAMS", "TABLES", "QUERIES", "TOPICS", "PROPERTIES", "SNAPSHOTS")
#: ksqlDB statements streamql does not take, by their first words, and why (docs/ksqldb.md)
REFUSED_STATEMENTS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("CREATE", "TYPE"), "CREATE TYPE is not supported: write the STRUCT<...> type on each column"),
    (("DROP", "TYPE"), "DROP TYPE is not supported: streamql has no named types (see CREATE TYPE)"),
    (("SHOW", "TYPES"), "SHOW TYPES is not supported: streamql has no named types (see CREATE TYPE)"),
    (
        ("CREATE", "SOURCE", "STREAM"),
        "CREATE SOURCE STREAM (a read-only stream) is not supported yet: declare it with CREATE STREAM",
    ),
    (
        ("CREATE", "SOURCE", "TABLE"),
        "CREATE SOURCE TABLE (a read-only table) is not supported yet: declare it with CREATE TABLE "
        "(every table answers pull queries)",
    ),
    (("CREATE", "SOURCE", "CONNECTOR"), "Kafka Connect connectors are outside streamql: run them in Kafka Connect"),
    (("CREATE", "SINK", "CONNECTOR"), "Kafka Connect connectors are outside streamql: run them in Kafka Connect"),
    (("CREATE", "CONNECTOR"), "Kafka Connect connectors are outside streamql: run them in Kafka Connect"),
    (("DROP", "CONNECTOR"), "Kafka Connect connectors are outside streamql: run them in Kafka Connect"),
    (("DESCRIBE", "CONNECTOR"), "Kafka Connect connectors are outside streamql: run them in Kafka Connect"),
    (("SHOW", "CONNECTORS"), "Kafka Connect connectors are outside streamql: run them in Kafka Connect"),
    (("LIST", "CONNECTORS"), "Kafka Connect connectors are outside streamql: run them in Kafka Connect"),
    (
        ("RUN", "SCRIPT"),
        "RUN SCRIPT is not supported: a statement never reads a file; pass the file to "
        "`streamql exec --file` or `streamql apply`, or to DeployScriptOperator (the shell, "
        "`streamql shell`, reads it itself)",
    ),
    (
        ("DEFINE",),
        "variables (DEFINE) are not supported: statements are never assembled from text; "
        "use Airflow's templated fields or params",
    ),
    (
        ("UNDEFINE",),
        "variables (UNDEFINE) are not supported: statements are never assembled from text; "
        "use Airflow's templated fields or params",
    ),
    (("SHOW", "VARIABLES"), "variables are not supported (see DEFINE)"),
    (
        ("ASSERT",),
        "ASSERT is not supported: use SHOW STREAMS/TABLES, or `streamql plan`, which checks "
        "every source a deploy file needs",
    ),
)
SOURCE_KINDS = ("STREAM", "TABLE")
#: deepest nesting of brackets in a statement: sqlglot parses each level with ~20 Python
#: frames, so much deeper text would exhaust the interpreter's stack (RecursionError)
MAX_NESTING = 32
#: opening and closing brackets, counted on the token stream
OPENERS = {
    TokenType.L_PAREN: TokenType.R_PAREN,
    TokenType.L_BRACKET: TokenType.R_BRACKET,
    TokenType.L_BRACE: TokenType.R_BRACE,
}
CLOSERS = set(OPENERS.values())
#: most digits of an integer literal: Spark's widest exact number is DECIMAL(38)
MAX_DIGITS = 38
#: characters no statement may hold: PostgreSQL cannot store NUL in text (the command log
#: keeps every statement's text), and NUL cuts paths short in the operating system
FORBIDDEN_CHARACTERS = {"\x00": "a NUL character"}
#: forbidden characters, and lone surrogates (how Python decodes command-line bytes that
#: are not UTF-8): text no catalog can store
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def parse(script: str, *, limits: Limits | None = None) -> list[Statement]:
    """Parse a script of ``;``-separated statements into typed statements, each within
    ``limits`` (default: :meth:`Limits.from_env`).

    Raises :class:`ParseError` with the line and column of the first offending token.
    """
    limits = current(limits)
    check_text(script)
    if len(script) > limits.script_chars:
        found = f"the script is {len(script):,} characters long"
        raise ParseError(limits.exceeded("script_chars", found), line=1, col=1)
    try:
        tokens = DIALECT.tokenize(script)
    except TokenError as e:
        raise ParseError(f"cannot read the text: {e}", line=1, col=1) from None
    except RecursionError:
        raise ParseError("the text is too deeply nested or too long to read", line=1, col=1) from None
    check_tokens(script, tokens)
    ended, last = split_tokens(tokens)
    return [_parse_statement(script, group, limits) for group in [*ended, last] if group]


def _parse_statement(script: str, tokens: list[Token], limits: Limits) -> Statement:
    """One statement; a RecursionError that still escapes sqlglot (a huge expression the
    nesting check cannot see, such as a long chain of NOTs) is an error in the text."""
    first, last = tokens[0], tokens[-1]
    if last.end + 1 - first.start > limits.statement_chars:
        raise ParseError(
            limits.exceeded("statement_chars", f"the statement is {last.end + 1 - first.start:,} characters long"),
            line=first.line,
            col=start_col(first),
            text=_line(script, first),
        )
    try:
        return _StatementParser(script, tokens, limits).parse()
    except RecursionError:
        first = tokens[0]
        raise ParseError(
            "statement too deeply nested or too long",
            line=first.line,
            col=start_col(first),
            text=script[first.start : first.end + 1],
        ) from None


def check_text(script: str) -> None:
    """Characters no statement may hold, and text that is not Unicode (lone surrogates,
    as Python decodes undecodable command-line bytes)."""
    if not isinstance(script, str):
        raise ParseError(f"statements must be text, not {type(script).__name__}", line=1, col=1)
    found = UNSTORABLE.search(script)
    if found:
        k, ch = found.start(), found.group()
        line = script.count("\n", 0, k) + 1
        col = k - (script.rfind("\n", 0, k) + 1) + 1
        what = FORBIDDEN_CHARACTERS.get(ch) or f"a character that is not Unicode text ({ch!r})"
        raise ParseError(f"the text holds {what}", line=line, col=col)


def check_tokens(script: str, tokens: list[Token]) -> None:
    """Lexical limits checked before any statement is parsed: nesting at most
    :data:`MAX_NESTING` deep, and numbers Spark can hold (finite, at most :data:`MAX_DIGITS`
    digits when whole)."""
    depth = 0
    for token in tokens:
        if token.token_type in OPENERS:
            depth += 1
            if depth > MAX_NESTING:
                raise ParseError(
                    f"statement too deeply nested: more than {MAX_NESTING} levels of parentheses",
                    line=token.line,
                    col=start_col(token),
                    text=_line(script, token),
                )
        elif token.token_type in CLOSERS:
            depth = max(0, depth - 1)
        elif token.token_type == TokenType.SEMICOLON:
            depth = 0
        elif token.token_type == TokenType.NUMBER:
            number(token, script)


def number(token: Token, script: str) -> int | float:
    """The value of a NUMBER token; ParseError for what no Spark number can hold."""
    text = token.text
    problem = None
    if not any(c in text for c in ".eE"):
        if len(text.lstrip("0")) > MAX_DIGITS:
            problem = f"more than {MAX_DIGITS} digits"
        elif text.isascii() and text.isdigit():
            return int(text)
        else:
            problem = "not a number"
    else:
        try:
            value = float(text)
        except ValueError:
            value, problem = None, "not a number"
        if value is not None and not math.isfinite(value):
            problem = "out of range of a DOUBLE"
        elif value == 0 and any(c in "123456789" for c in re.split("[eE]", text)[0]):
            problem = "too small for a DOUBLE (it would read as 0)"
        if problem is None and value is not None:
            return value
    shown = text if len(text) <= 40 else text[:37] + "..."
    raise ParseError(f"number {shown!r} is {problem}", line=token.line, col=start_col(token), text=_line(script, token))


def duration_problem(seconds: float) -> str | None:
    """Why a duration of ``seconds`` cannot be run (None if it can): Spark is given whole
    milliseconds (a fraction would be rounded, 0.0001 MILLISECONDS to 0), up to
    :data:`MAX_DURATION_SECONDS`."""
    if seconds > MAX_DURATION_SECONDS:
        return f"is out of range: Spark computes with durations up to {MAX_DURATION_SECONDS // 86400:,} DAYS"
    millis = seconds * 1000
    if abs(millis - round(millis)) > max(1e-6, millis * 1e-12):
        return (
            f"is not a whole number of milliseconds (it would run as {round(millis)} ms): "
            f"durations are whole milliseconds"
        )
    return None


def _line(script: str, token: Token) -> str:
    lines = script.splitlines() or [""]
    return lines[min(token.line, len(lines)) - 1].strip()[:120]


def parse_one(text: str) -> Statement:
    """Parse exactly one statement."""
    statements = parse(text)
    if len(statements) != 1:
        raise ParseError(f"expected one statement, got {len(statements)}", line=1, col=1)
    return statements[0]


class _StatementParser:
    """Recursive descent over the tokens of one statement."""

    def __init__(self, script: str, tokens: list[Token], limits: Limits | None = None):
        self.script = script
        self.tokens = tokens
        self.limits = current(limits)
        self.i = 0
        self.start, self.end = tokens[0].start, tokens[-1].end + 1
        self.window: WindowSpec | None = None
        self.window_at: tuple[int, int] | None = None
        #: where each WITH property's name stands, to place errors at it
        self.property_at: dict[str, tuple[int, int]] = {}
        #: the WITHIN of each JOIN of the SELECT (outside subqueries), in order
        self.withins: list[Within | None] = []
        self.partition_by: list[str] = []

    # -- token helpers -------------------------------------------------------
    def peek(self, ahead: int = 0) -> Token | None:
        j = self.i + ahead
        return self.tokens[j] if j < len(self.tokens) else None

    def token(self, what: str) -> Token:
        """The current token; ParseError when the statement ends before ``what``."""
        token = self.peek()
        if token is None:
            self.fail(f"expected {what}")
        return token

    def at(self, *words: str) -> bool:
        for k, word in enumerate(words):
            token = self.peek(k)
            if token is None or token.text.upper() != word:
                return False
        return True

    def accept(self, *words: str) -> bool:
        if self.at(*words):
            self.i += len(words)
            return True
        return False

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            self.fail(f"expected {' '.join(words)}")

    def fail(self, message: str, token: Token | None = None) -> NoReturn:
        token = token or self.peek()
        if token is None:
            last = self.tokens[-1]
            raise ParseError(f"{message} at the end of the statement", line=last.line, col=last.col + 1, text=self.text)
        raise ParseError(
            f"{message}, got {token.text!r}", line=token.line, col=start_col(token), text=self.line_of(token)
        )

    def line_of(self, token: Token) -> str:
        return _line(self.script, token)

    @property
    def text(self) -> str:
        return self.script[self.start : self.end]

    def name(self, what: str = "a name") -> str:
        """A plain SQL identifier, never a path or a qualified name."""
        token = self.peek()
        if token is None or not (token.token_type in NAME_TOKENS or token.text.isidentifier()):
            self.fail(f"expected {what}")
        nxt = self.peek(1)
        problem = name_problem(token.text)
        if problem or (nxt is not None and nxt.token_type == TokenType.DOT):
            bad = token.text
            j = self.i + 1
            while j < len(self.tokens) and self.tokens[j].token_type in (TokenType.DOT, TokenType.SLASH, *NAME_TOKENS):
                bad += self.tokens[j].text
                j += 1
            shown = bad if len(bad) <= 60 else bad[:57] + "..."
            raise ParseError(
                f"{shown!r} is not a plain SQL name: {problem or name_problem(bad) or 'a name is not qualified'}",
                line=token.line,
                col=start_col(token),
                text=self.line_of(token),
            )
        self.i += 1
        return token.text

    def object_name(self) -> str:
        """Stream, table and query names are case-insensitive, kept upper-case (as in ksqlDB)."""
        return self.name("a stream, table or query name").upper()

    def at_primary_key(self) -> bool:
        # sqlglot tokenizes PRIMARY KEY as one token when the words sit on one line
        return self.at("PRIMARY KEY") or self.at("PRIMARY", "KEY")

    def done(self) -> None:
        if self.peek() is not None:
            self.fail("unexpected text after the statement")

    def rest(self) -> tuple[str, Token]:
        """The remaining text of the statement and its first token."""
        token = self.peek()
        if token is None:
            self.fail("expected a SELECT")
        return self.script[token.start : self.end], token

    def make(self, cls: type[Statement], **fields: Any) -> Statement:
        first = self.tokens[0]
        if self.partition_by and not (cls is CreateAsSelect and fields.get("kind") == "STREAM"):
            raise ParseError(
                "PARTITION BY re-keys the stream a CREATE STREAM ... AS SELECT writes; "
                + (
                    "a TABLE is keyed by its GROUP BY"
                    if cls is CreateAsSelect
                    else "INSERT INTO keeps its target's declared key"
                    if cls is InsertSelect
                    else "a pull query has no output to key"
                ),
                line=first.line,
                col=start_col(first),
                text=self.text[:120],
            )
        select_at = getattr(self, "select_at", (first.line, start_col(first)))
        return cls(
            **fields,
            text=self.text,
            line=first.line,
            col=start_col(first),
            select_at=select_at,
            window=self.window,
            window_at=self.window_at,
            property_at=dict(self.property_at),
            withins=tuple(self.withins),
            partition_by=tuple(self.partition_by),
        )

    # -- statements ------------------------------------------------------------
    def parse(self) -> Statement:
        token = self.token("a statement")
        for words, reason in REFUSED_STATEMENTS:
            if self.at(*words):
                raise ParseError(reason, line=token.line, col=start_col(token), text=self.text[:120])
        handler = self.HANDLERS.get(token.text.upper())
        if handler is None:
            self.fail(
                "expected a StreamQL statement (CREATE, ALTER, INSERT, SELECT, PAUSE, RESUME, "
                "TERMINATE, DROP, SHOW, LIST, DESCRIBE, EXPLAIN, SNAPSHOT, RESTORE, PROMOTE, DISCARD, DIFF, "
                "SET, UNSET)"
            )
        return handler(self)

    def create(self) -> Statement:
        self.expect("CREATE")
        or_replace = self.accept("OR", "REPLACE")
        kind = self.source_kind()
        if_not_exists = self.accept("IF", "NOT", "EXISTS")
        if if_not_exists and or_replace:
            self.fail("OR REPLACE and IF NOT EXISTS cannot go together", self.tokens[self.i - 1])
        name = self.object_name()
        nxt = self.peek()
        if nxt is not None and nxt.token_type == TokenType.L_PAREN:
            columns = self.column_list(kind)
            properties = self.properties()
            self.done()
            return self.make(
                CreateSource,
                kind=kind,
                name=name,
                columns=columns,
                properties=properties,
                or_replace=or_replace,
                if_not_exists=if_not_exists,
            )
        properties = self.properties()
        self.expect("AS")
        select, emit = self.select_body()
        return self.make(
            CreateAsSelect,
            kind=kind,
            name=name,
            properties=properties,
            select=select,
            emit=emit,
            or_replace=or_replace,
            if_not_exists=if_not_exists,
        )

    def source_kind(self) -> str:
        for kind in SOURCE_KINDS:
            if self.accept(kind):
                return kind
        self.fail("expected STREAM or TABLE")

    def column_list(self, kind: str) -> list[Column]:
        self.expect_type(TokenType.L_PAREN, "(")
        columns = [self.column(kind)]
        while self.accept_type(TokenType.COMMA):
            columns.append(self.column(kind))
        self.expect_type(TokenType.R_PAREN, ")")
        return columns

    def column(self, kind: str) -> Column:
        name = self.name("a column name")
        start = self.peek()
        depth = 0
        while (token := self.peek()) is not None:
            if depth == 0 and (
                token.token_type in (TokenType.COMMA, TokenType.R_PAREN) or self.at("KEY") or self.at_primary_key()
            ):
                break
            depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(token.token_type, 0)
            depth += {TokenType.LT: 1, TokenType.GT: -1}.get(token.token_type, 0)
            self.i += 1
        if start is None or self.peek() is start:
            self.fail(f"expected a type for column {name!r}")
        type_text = self.script[start.start : self.tokens[self.i - 1].end + 1]
        try:
            data_type = parse_type(type_text)
        except TypeProblem as e:
            raise ParseError(
                f"column {name!r} of type {type_text!r}: {e}",
                line=start.line,
                col=start_col(start),
                text=self.line_of(start),
            ) from None
        key = False
        if self.at_primary_key():
            self.accept("PRIMARY KEY") or self.accept("PRIMARY", "KEY")
            key = True
            if kind != "TABLE":
                self.fail("PRIMARY KEY is for tables; a stream column is marked KEY", self.tokens[self.i - 1])
        elif self.accept("KEY"):
            key = True
            if kind != "STREAM":
                self.fail("a table key column is marked PRIMARY KEY", self.tokens[self.i - 1])
        return Column(name, data_type, key)

    def properties(self) -> dict[str, Any]:
        props: dict[str, Any] = {}
        if not self.accept("WITH"):
            return props
        self.expect_type(TokenType.L_PAREN, "(")
        while True:
            key_token = self.peek()
            key = self.name("a property name").lower()
            self.expect_type(TokenType.EQ, "=")
            if key in props:
                self.fail(f"property {key!r} is given twice", key_token)
            if key_token is not None:
                self.property_at[key] = (key_token.line, start_col(key_token))
            props[key] = self.literal()
            if not self.accept_type(TokenType.COMMA):
                break
        self.expect_type(TokenType.R_PAREN, ")")
        return props

    def literal(self) -> Any:
        token = self.peek()
        if token is None:
            self.fail("expected a value")
        sign = 1
        if token.token_type == TokenType.DASH:
            sign, self.i = -1, self.i + 1
            token = self.peek()
        self.i += 1
        if token is not None and token.token_type == TokenType.STRING and sign == 1:
            return token.text
        if token is not None and token.token_type == TokenType.NUMBER:
            return sign * number(token, self.script)
        if token is not None and token.text.upper() in ("TRUE", "FALSE") and sign == 1:
            return token.text.upper() == "TRUE"
        self.i -= 1
        self.fail("expected a string, number or boolean")

    def expect_type(self, token_type: TokenType, shown: str) -> None:
        if not self.accept_type(token_type):
            self.fail(f"expected {shown!r}")

    def accept_type(self, token_type: TokenType) -> bool:
        token = self.peek()
        if token is not None and token.token_type == token_type:
            self.i += 1
            return True
        return False

    def select_body(self) -> tuple[exp.Select, str | None]:
        if not self.at("SELECT"):
            self.fail("expected SELECT")
        emit = None
        last = len(self.tokens)
        if len(self.tokens) - self.i >= 2 and self.tokens[-2].text.upper() == "EMIT":
            mode = self.tokens[-1].text.upper()
            if mode not in EMIT_MODES:
                self.fail("expected EMIT CHANGES or EMIT FINAL", self.tokens[-1])
            emit, last = mode, len(self.tokens) - 2
        first = self.tokens[self.i]
        sql = self.take_clauses(first, last)
        self.i = len(self.tokens)
        self.select_at = (first.line, start_col(first))
        select = parse_select(sql, first)
        self.check_size([select], first)
        return select, emit

    def check_size(self, trees: list[exp.Expr], first: Token) -> None:
        """At most ``expression_nodes`` nodes in ``trees`` (a SELECT, or the values of an
        INSERT): planning time grows with the square of them (sqlglot's qualify)."""
        nodes = sum(1 for tree in trees for _ in tree.walk())
        if nodes > self.limits.expression_nodes:
            raise ParseError(
                self.limits.exceeded("expression_nodes", f"the expression has {nodes:,} nodes"),
                line=first.line,
                col=start_col(first),
                text=self.line_of(first),
            )

    # -- ksqlDB clauses inside a SELECT -------------------------------------------------
    def take_clauses(self, first: Token, last: int) -> str:
        """The SELECT text with its WINDOW and WITHIN clauses parsed into ``self.window`` /
        ``self.withins`` and blanked out (same length, so positions stay right). A WITHIN
        belongs to the JOIN before it (``a JOIN b WITHIN 1 MINUTE ON ... JOIN c WITHIN ...``)."""
        text = list(self.script[first.start : self.tokens[last - 1].end + 1])
        depth, j = 0, self.i
        while j < last:
            token = self.tokens[j]
            depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(token.token_type, 0)
            word = token.text.upper()
            nxt = self.tokens[j + 1].text.upper() if j + 1 < last else ""
            if depth == 0 and token.token_type == TokenType.JOIN:
                self.withins.append(None)
                j += 1
                continue
            if depth == 0 and word == "WINDOW" and nxt in WINDOW_KINDS:
                if self.window is not None:
                    self.fail("only one WINDOW clause is allowed", token)
                parse_clause = self.window_clause
            elif depth == 0 and (word == "PARTITION BY" or (word == "PARTITION" and nxt == "BY")):
                if self.partition_by:
                    self.fail("only one PARTITION BY clause is allowed", token)
                parse_clause = lambda: self.partition_clause(last)  # noqa: E731
            elif depth == 0 and word == "WITHIN":
                if not self.withins:
                    self.fail(
                        "WITHIN belongs to a JOIN: write it after the joined stream (JOIN s WITHIN 1 MINUTE ON ...)",
                        token,
                    )
                if self.withins[-1] is not None:
                    self.fail("only one WITHIN clause per JOIN is allowed", token)
                parse_clause = self.within_clause
            else:
                j += 1
                continue
            self.i = j + 1
            parse_clause()
            end = self.tokens[self.i - 1].end
            for k in range(token.start, end + 1):
                if text[k - first.start] != "\n":
                    text[k - first.start] = " "
            j = self.i
        return "".join(text)

    def partition_clause(self, last: int) -> None:
        """``PARTITION BY col[, col ...]`` (ksqlDB's re-keying of a stream): names of output
        columns, which become the output's KEY columns. It comes last, before HAVING or EMIT."""
        if self.tokens[self.i - 1].text.upper() == "PARTITION":
            self.expect("BY")
        self.partition_by.append(self.name("a column name after PARTITION BY"))
        while self.i < last and self.accept_type(TokenType.COMMA):
            self.partition_by.append(self.name("a column name after PARTITION BY"))
        if self.i < last and not self.at("HAVING"):
            self.fail("PARTITION BY takes names of output columns (alias an expression in the SELECT list)")

    def window_clause(self) -> None:
        window = self.tokens[self.i - 1]  # the WINDOW keyword
        self.window_at = (window.line, start_col(window))
        kind = self.tokens[self.i].text.upper()
        self.i += 1
        self.expect_type(TokenType.L_PAREN, "(")
        advance = None
        if kind == "SESSION":
            size = self.duration("session gap")
        else:
            self.expect("SIZE")
            size = self.duration("window SIZE")
            if kind == "HOPPING":
                self.expect_type(TokenType.COMMA, ",")
                self.expect("ADVANCE", "BY")
                advance = self.duration("ADVANCE BY")
                if advance > size:
                    bad = self.tokens[self.i - 2]
                    raise ParseError(
                        f"ADVANCE BY ({advance:g}s) cannot be larger than SIZE ({size:g}s)",
                        line=bad.line,
                        col=start_col(bad),
                        text=self.line_of(bad),
                    )
        grace = self.grace_period(comma=True)
        self.expect_type(TokenType.R_PAREN, ")")
        self.window = WindowSpec(kind, size, advance, grace)

    def within_clause(self) -> None:
        if self.accept_type(TokenType.L_PAREN):
            before = self.duration("WITHIN", allow_zero=True)
            self.expect_type(TokenType.COMMA, ",")
            after = self.duration("WITHIN", allow_zero=True)
            self.expect_type(TokenType.R_PAREN, ")")
        else:
            before = after = self.duration("WITHIN", allow_zero=True)
        self.withins[-1] = Within(before, after, self.grace_period(comma=False))

    def grace_period(self, *, comma: bool) -> float | None:
        if comma and not (self.at(",", "GRACE") and self.accept_type(TokenType.COMMA)):
            return None
        if not self.accept("GRACE", "PERIOD"):
            return None
        return self.duration("GRACE PERIOD", allow_zero=True)

    def duration(self, what: str, *, allow_zero: bool = False) -> float:
        """``<number> <unit>``, e.g. ``1 MINUTE``, ``500 MILLISECONDS``; in seconds."""
        start = self.token(f"a duration for {what}")
        value = self.literal()
        unit_token = self.peek()
        unit = unit_token.text.upper() if unit_token else ""
        seconds = TIME_UNITS.get(unit[:-1] if unit.endswith("S") and unit[:-1] in TIME_UNITS else unit)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or seconds is None:
            self.fail(f"expected a duration for {what}, such as 10 SECONDS or 1 MINUTE", unit_token or start)
        self.i += 1
        if not math.isfinite(value * seconds):
            raise ParseError(
                f"{what} {value} {unit} is out of range",
                line=start.line,
                col=start_col(start),
                text=self.line_of(start),
            )
        if value < 0 or (value == 0 and not allow_zero):
            raise ParseError(
                f"{what} must be {'zero or ' if allow_zero else ''}positive, got {value} {unit}",
                line=start.line,
                col=start_col(start),
                text=self.line_of(start),
            )
        problem = duration_problem(value * seconds)
        if problem:
            raise ParseError(
                f"{what} {value} {unit} {problem}", line=start.line, col=start_col(start), text=self.line_of(start)
            )
        return value * seconds

    def alter(self) -> Statement:
        self.expect("ALTER")
        if self.accept("QUERY"):
            return self.alter_query()
        kind = self.source_kind()
        name = self.object_name()
        columns = []
        while True:
            self.expect("ADD")
            self.accept("COLUMN")
            columns.append(self.column(kind))
            if not self.accept_type(TokenType.COMMA):
                break
        self.done()
        return self.make(AlterSource, kind=kind, name=name, add_columns=columns)

    def alter_query(self) -> Statement:
        """``ALTER QUERY <id> SET <limit> = n`` or ``ALTER QUERY <id> UNSET <limit>``."""
        query_id = self.object_name()
        unset = self.accept("UNSET")
        if not unset:
            self.expect("SET")
        token = self.peek()
        limit = rate_limit_named(token.text if token is not None else None)
        if limit is None:
            self.fail(f"expected a query setting ({', '.join(RateLimit)})")
        self.i += 1
        value = None
        if not unset:
            self.expect_type(TokenType.EQ, "=")
            token = self.peek()
            if token is not None and token.text.upper() == "DEFAULT":
                self.fail(f"write ALTER QUERY {query_id} UNSET {limit} to lift a rate limit", token)
            value = self.literal()
            if problem := rate_problem(limit, value):
                self.fail(problem, token)
        self.done()
        return self.make(AlterQuery, query_id=query_id, limit=limit, value=value)

    def insert(self) -> Statement:
        self.expect("INSERT", "INTO")
        target = self.object_name()
        if self.at("SELECT"):
            select, emit = self.select_body()
            return self.make(InsertSelect, target=target, select=select, emit=emit)
        columns = None
        if self.accept_type(TokenType.L_PAREN):
            columns = [self.name("a column name")]
            while self.accept_type(TokenType.COMMA):
                token = self.token("a column name")
                column = self.name("a column name")
                if column.lower() in (c.lower() for c in columns):
                    raise ParseError(
                        f"column {column!r} is listed twice in the column list",
                        line=token.line,
                        col=start_col(token),
                        text=self.line_of(token),
                    )
                columns.append(column)
            self.expect_type(TokenType.R_PAREN, ")")
        self.expect("VALUES")
        rows = [self.row()]
        while self.accept_type(TokenType.COMMA):
            rows.append(self.row())
        self.check_size([v for row in rows for v in row], self.tokens[0])
        self.done()
        wanted = f"{len(columns)} columns" if columns else f"{len(rows[0])} values in the first row"
        for row in rows:
            if len(row) != len(columns or rows[0]):
                raise ParseError(
                    f"{wanted} but {len(row)} values",
                    line=self.tokens[0].line,
                    col=start_col(self.tokens[0]),
                    text=self.text,
                )
        return self.make(InsertValues, target=target, columns=columns, rows=rows)

    def row(self) -> list[exp.Expr]:
        """One ``(value, ...)`` of VALUES."""
        self.expect_type(TokenType.L_PAREN, "(")
        values = [self.value()]
        while self.accept_type(TokenType.COMMA):
            values.append(self.value())
        self.expect_type(TokenType.R_PAREN, ")")
        return values

    def value(self) -> exp.Expr:
        """One value of VALUES (...): a Spark SQL expression over literals (see
        :mod:`.values`), up to the next top-level ``,`` or the closing ``)``."""
        first, depth = self.peek(), 0
        while (token := self.peek()) is not None:
            token_type = token.token_type
            if depth == 0 and token_type in (TokenType.COMMA, TokenType.R_PAREN):
                break
            depth += 1 if token_type in OPENERS else -1 if token_type in CLOSERS else 0
            self.i += 1
        if first is None or self.peek() is first:
            self.fail("expected a value")
        text = self.script[first.start : self.tokens[self.i - 1].end + 1]
        try:
            tree = read_spark_sql(text)
        except SqlglotParseError as e:
            err = e.errors[0] if e.errors else {}
            description = (err.get("description") or str(e)).split(". Line")[0]
            description = re.sub(r"<Token token_type: [^,]+, text: ([^,]+),.*?>", r"'\1'", description)
            description = re.sub(r"<class 'sqlglot\.[\w.]*?(\w+)'>", r"\1", description)
            raise ParseError(
                f"invalid value {text[:60]!r}: {description}", line=first.line, col=start_col(first), text=text[:60]
            ) from None
        problem = check_value(tree)
        if problem is not None:
            raise ParseError(problem, line=first.line, col=start_col(first), text=self.line_of(first))
        tree.meta["text"] = text  # for messages: the value as written
        return tree

    def select(self) -> Statement:
        # ksqlDB writes a push query's LIMIT after EMIT CHANGES: taken off before the SELECT
        limit = None
        words = [t.text.upper() for t in self.tokens]
        at = next((j for j in range(len(words) - 3, 0, -1) if words[j : j + 3] == ["EMIT", "CHANGES", "LIMIT"]), None)
        if at is not None:
            begin, self.i = self.i, at + 3
            limit = self.count_after(None)
            self.done()
            self.tokens, self.i = self.tokens[: at + 2], begin
        select, emit = self.select_body()
        if emit == "FINAL":
            self.fail(
                "SELECT ... EMIT FINAL is a push query of a windowed aggregation, which streamql does not "
                "run: create a persistent query (CREATE TABLE <name> AS SELECT ... WINDOW ... EMIT FINAL) and "
                "PRINT it or pull from it, or write EMIT CHANGES for a push query of rows",
                self.tokens[-2],
            )
        if emit is None:
            return self.make(PullQuery, select=select)
        own = select.args.get("limit")
        if own is not None:
            if limit is not None:
                self.fail("a push query has one LIMIT: before or after EMIT CHANGES, not both", self.tokens[-2])
            value = own.expression if isinstance(own, exp.Limit) else None
            if not isinstance(value, exp.Literal) or value.is_string or not value.this.isdigit():
                self.fail("a push query's LIMIT is a whole number", self.tokens[-2])
            if not 1 <= int(value.this) <= MAX_COUNT:
                self.fail(f"a push query's LIMIT is a whole number from 1 to {MAX_COUNT}", self.tokens[-2])
            limit = int(value.this)
            select = select.copy()
            select.set("limit", None)
        return self.make(PushQuery, select=select, limit=limit)

    def control(self) -> Statement:
        action = self.tokens[self.i].text.upper()
        self.i += 1
        query_id = None if self.accept("ALL") else self.object_name()
        skip = action == "RESUME" and self.accept("SKIP")
        if skip:
            self.expect("BAD")
            self.expect("RECORDS")
        self.done()
        return self.make(QueryControl, action=action, query_id=query_id, skip_bad_records=skip)

    def drop(self) -> Statement:
        self.expect("DROP")
        kind = self.source_kind()
        if_exists = self.accept("IF", "EXISTS")
        name = self.object_name()
        delete_topic = self.accept("DELETE", "TOPIC")
        self.done()
        return self.make(DropSource, kind=kind, name=name, if_exists=if_exists, delete_topic=delete_topic)

    def show(self) -> Statement:
        self.i += 1
        for what in SHOW_TARGETS:
            if self.accept(what):
                extended = self.accept("EXTENDED")
                self.done()
                return self.make(Show, what=what, extended=extended)
        self.fail(f"expected {', '.join(SHOW_TARGETS[:-1])} or {SHOW_TARGETS[-1]}")

    def describe(self) -> Statement:
        self.expect("DESCRIBE")
        name = self.object_name()
        if self.accept("STATE"):
            limit = self.count_after("LIMIT") if self.at("LIMIT") else 20
            if limit > MAX_STATE_ROWS:
                self.fail(f"DESCRIBE ... STATE shows at most {MAX_STATE_ROWS} rows per operator, not {limit}")
            self.done()
            return self.make(Describe, name=name, state=True, state_limit=limit)
        extended = self.accept("EXTENDED")
        self.done()
        return self.make(Describe, name=name, extended=extended)

    def snapshot(self) -> Statement:
        self.expect("SNAPSHOT")
        query_id = self.object_name()
        at = self.peek()  # errors in the WITH list point at it
        props = self.properties()
        unknown = sorted(set(props) - {"keep", "max_age_hours"})
        if unknown:
            self.fail(f"unknown property {unknown[0]!r} of SNAPSHOT (known: keep, max_age_hours)", at)
        keep, age = props.get("keep"), props.get("max_age_hours")
        problem = retention_problem(keep, age)
        if problem:
            self.fail(problem, at)
        self.done()
        return self.make(TakeSnapshot, query_id=query_id, keep=keep, max_age_hours=age)

    def shadow_action(self) -> Statement:
        action = self.tokens[self.i].text.upper()
        self.i += 1
        query_id = self.object_name()
        ready = self.ready_gate() if action == "PROMOTE" and self.at("WHEN") else None
        self.done()
        return self.make(ShadowAction, action=action, query_id=query_id, ready=ready)

    def ready_gate(self) -> ReadyGate:
        """``WHEN READY [WITHIN <duration>] [LAG <= n]``."""
        start = self.peek()
        self.expect("WHEN", "READY")
        within = self.duration("WITHIN") if self.accept("WITHIN") else READY_WITHIN
        max_lag = 0
        if self.accept("LAG"):
            self.expect_type(TokenType.LTE, "<=")
            token = self.peek()
            max_lag = self.literal()
            if isinstance(max_lag, bool) or not isinstance(max_lag, int) or not 0 <= max_lag <= MAX_COUNT:
                self.fail(f"LAG <= n takes a whole number of input files from 0 to {MAX_COUNT}", token)
        problem = ready_gate_problem(within, max_lag, READY_WINDOW)
        if problem:
            self.fail(problem, start)
        return ReadyGate(within, max_lag)

    def diff(self) -> Statement:
        self.expect("DIFF")
        query_id = self.object_name()
        self.done()
        return self.make(DiffShadow, query_id=query_id)

    def restore(self) -> Statement:
        self.expect("RESTORE")
        query_id = self.object_name()
        self.expect("TO")
        if self.at("TIMESTAMP"):
            self.i += 1
            token = self.token("a time in quotes")
            if token.token_type != TokenType.STRING:
                self.fail("expected a time in quotes ('2026-11-26T09:00:00Z')")
            self.i += 1
            try:
                millis = timestamp_millis(token.text)
            except ValueError as e:
                self.fail(f"TIMESTAMP {token.text!r} is {e}", token)
            self.done()
            return self.make(RestoreToTime, query_id=query_id, timestamp_ms=millis)
        self.expect("SNAPSHOT")
        number = self.count_after(None)
        self.done()
        return self.make(RestoreQuery, query_id=query_id, number=number)

    def count_after(self, keyword: str | None) -> int:
        """A positive whole number (after ``keyword``, if given)."""
        if keyword is not None:
            self.expect(keyword)
        token = self.peek()
        value = self.literal() if token is not None and token.token_type == TokenType.NUMBER else None
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_COUNT:
            self.fail(f"expected a whole number from 1 to {MAX_COUNT}", token)
        return value

    def print_topic(self) -> Statement:
        self.expect("PRINT")
        token = self.peek()
        if token is not None and token.token_type == TokenType.STRING:  # PRINT 'topic', as in ksqlDB
            self.i += 1
            problem = name_problem(token.text)
            if problem:
                self.fail(f"PRINT {token.text!r}: {problem}", token)
            name = token.text.upper()
        else:
            name = self.object_name()
        from_beginning = self.accept("FROM", "BEGINNING")
        interval = self.count_after(None) if self.accept("INTERVAL") or self.accept("SAMPLE") else 1
        limit = self.count_after("LIMIT") if self.at("LIMIT") else None
        self.done()
        return self.make(PrintTopic, name=name, from_beginning=from_beginning, interval=interval, limit=limit)

    def explain(self) -> Statement:
        self.expect("EXPLAIN")
        query_id = self.object_name()
        self.done()
        return self.make(Explain, query_id=query_id)

    def set(self) -> Statement:
        self.expect("SET")
        token = self.peek()
        if token is None or token.token_type != TokenType.STRING:
            self.fail("expected a quoted property name, as in SET 'auto.offset.reset' = 'earliest'")
        self.i += 1
        self.expect_type(TokenType.EQ, "=")
        value = self.literal()
        self.done()
        return self.make(SetProperty, key=token.text.lower(), value=str(value))

    def unset(self) -> Statement:
        self.expect("UNSET")
        token = self.peek()
        if token is None or token.token_type != TokenType.STRING:
            self.fail("expected a quoted property name, as in UNSET 'auto.offset.reset'")
        self.i += 1
        self.done()
        return self.make(SetProperty, key=token.text.lower(), value=None)

    HANDLERS: dict[str, Callable[[_StatementParser], Statement]] = {
        "CREATE": create,
        "ALTER": alter,
        "INSERT": insert,
        "SELECT": select,
        "PAUSE": control,
        "RESUME": control,
        "TERMINATE": control,
        "DROP": drop,
        "SHOW": show,
        "LIST": show,
        "DESCRIBE": describe,
        "EXPLAIN": explain,
        "PRINT": print_topic,
        "SNAPSHOT": snapshot,
        "RESTORE": restore,
        "PROMOTE": shadow_action,
        "DISCARD": shadow_action,
        "DIFF": diff,
        "SET": set,
        "UNSET": unset,
    }


#: what sqlglot's parser raises besides its ParseError on some text it cannot read (ksqlDB's
#: ``MAP('k' := 1)`` gives an IndexError): such text is refused, never a traceback (a
#: RecursionError is the depth bound's, said where the whole statement is parsed)
SQLGLOT_SLIPS = (IndexError, KeyError, TypeError, ValueError, AttributeError)


def read_spark_sql(text: str) -> exp.Expr:
    """``text`` read by sqlglot as Spark SQL; SqlglotParseError for any text it cannot read."""
    try:
        return sqlglot.parse_one(text, dialect=DIALECT)
    except SQLGLOT_SLIPS as e:
        raise SqlglotParseError(f"it cannot be read as Spark SQL ({type(e).__name__})") from None


def parse_select(sql: str, first: Token) -> exp.Select:
    """Parse a Spark SQL SELECT; errors are re-based onto the whole script's lines."""
    check_double_quotes(sql, first)
    try:
        tree = read_spark_sql(sql)
    except SqlglotParseError as e:
        err = e.errors[0] if e.errors else {}
        line, col = err.get("line") or 1, err.get("col") or 1
        col = max(1, col - len(err.get("highlight") or "x") + 1)
        if line == 1:
            col += start_col(first) - 1
        near = (err.get("start_context", "") + err.get("highlight", "")).strip()[-60:]
        description = (err.get("description") or str(e)).split(". Line")[0]
        description = re.sub(r"<Token token_type: [^,]+, text: ([^,]+),.*?>", r"'\1'", description)
        raise ParseError(
            f"invalid SELECT: {description}", line=first.line + line - 1, col=col, text=near or None
        ) from None
    if isinstance(tree, exp.SetOperation):
        # a top-level UNION ALL is the SELECT of all its rows: the same query as the union in
        # a subquery, which the analyzer checks (UNION, INTERSECT, EXCEPT are refused there, with why)
        tree = exp.select("*").from_(exp.Subquery(this=tree))
    if not isinstance(tree, exp.Select):
        raise ParseError(
            "expected a single SELECT (or a UNION ALL of SELECTs)", line=first.line, col=start_col(first), text=sql[:60]
        )
    mark_subscripts(tree)  # ksqlDB's a[1], m['k'] and s->f (see .shapes)
    name_fields(tree)
    for data_type in list(tree.find_all(exp.DataType)):
        if isinstance(data_type.parent, (exp.DataType, exp.ColumnDef)):
            continue  # checked with the type it is part of
        unsupported = next((t.this for t in data_type.find_all(exp.DataType) if t.this in UNSUPPORTED), None)
        try:  # a CAST's type is a typed value too: generated from the table, never as written
            if unsupported is not None:
                raise TypeProblem(f"type {unsupported.value} is not supported: {UNSUPPORTED[unsupported]}")
            data_type.replace(SqlType.from_sqlglot(data_type).to_sqlglot())
        except TypeProblem as e:
            raise ParseError(str(e), line=first.line, col=start_col(first), text=sql[:60]) from None
    # a unit word (EXTRACT(YEAR ...), DATE_TRUNC, TIMESTAMPADD, ...) is written back into the
    # generated SQL as it stands: only a plain word may be one, never quoted text
    bad = next((v for v in tree.find_all(exp.Var) if not PLAIN_NAME.fullmatch(v.name)), None)
    if bad is not None:
        raise ParseError(
            f"{bad.name!r} is not a unit or keyword (a plain word such as YEAR, HOUR or MILLISECOND)",
            line=first.line,
            col=start_col(first),
            text=sql[:60],
        )
    return tree


def check_double_quotes(sql: str, first: Token) -> None:
    """``"x"`` in a SELECT is a quoted name in ksqlDB but a string in Spark SQL: a pasted
    ksqlDB statement would silently read the text "x" instead of the column x. Refused,
    saying how to write either."""
    for token in DIALECT.tokenize(sql):
        if token.token_type == TokenType.STRING and sql[token.start] == '"':
            line = first.line + token.line - 1
            col = start_col(token) + (start_col(first) - 1 if token.line == 1 else 0)
            raise ParseError(
                f'"{token.text}" is ambiguous: a quoted name in ksqlDB, a string in Spark SQL; write '
                f"`{token.text}` for a column or '{token.text}' for a string",
                line=line,
                col=col,
                text=sql[token.start : token.end + 1][:60],
            )
