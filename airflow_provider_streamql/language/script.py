"""A script cut into its statements on the token stream the parser reads (one tokenizer, not
a second one): which statements a ``;`` has ended and what is still open. The parser reads
each piece; an interactive shell asks whether typed-in text is a whole request yet (a ``;``
inside quotes or a comment ends nothing), what the open statement holds so far (for
completion), and which piece is ksqlDB's client-side ``RUN SCRIPT '<file>'``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from ..errors import ParseError
from .dialect import DIALECT

#: the words of the one statement a shell runs itself (ksqlDB's CLI reads the file too)
RUN_SCRIPT = ("RUN", "SCRIPT")


def start_col(token: Token) -> int:
    """sqlglot tokens carry the column of their last character; callers want the first."""
    return max(1, token.col - (token.end - token.start))


def split_tokens(tokens: Sequence[Token]) -> tuple[list[list[Token]], list[Token]]:
    """The tokens of each statement a ``;`` ends, in order, and those after the last ``;``
    (an empty statement, ``;;``, is none)."""
    ended: list[list[Token]] = []
    pending: list[Token] = []
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            if pending:
                ended.append(pending)
            pending = []
        else:
            pending.append(token)
    return ended, pending


@dataclass(frozen=True)
class Piece:
    """One statement's tokens in ``script``."""

    script: str
    tokens: tuple[Token, ...]

    @property
    def text(self) -> str:
        """The statement as written, from its first token to its last."""
        return self.script[self.tokens[0].start : self.tokens[-1].end + 1]

    @property
    def words(self) -> tuple[str, ...]:
        """Its tokens' texts (a quoted name or string without its quotes)."""
        return tuple(t.text for t in self.tokens)

    def script_file(self) -> str | None:
        """The file ``RUN SCRIPT '<file>'`` names; None for any other statement, and a
        :class:`ParseError` for RUN SCRIPT without one quoted file name."""
        if tuple(t.text.upper() for t in self.tokens[:2]) != RUN_SCRIPT:
            return None
        if len(self.tokens) != 3 or self.tokens[2].token_type != TokenType.STRING or not self.tokens[2].text:
            first = self.tokens[0]
            raise ParseError(
                "RUN SCRIPT takes one quoted file name, as in RUN SCRIPT 'pipeline.sql'",
                line=first.line,
                col=start_col(first),
                text=self.text[:120],
            )
        return self.tokens[2].text


@dataclass(frozen=True)
class Cut:
    """What typed-in text holds: the statements a ``;`` ends, and the open one."""

    #: the statements a ``;`` ends, in order
    ended: tuple[Piece, ...]
    #: the tokens after the last ``;`` (None: nothing but blanks and comments)
    open: Piece | None
    #: False while a quote or a block comment is open: the text goes on
    readable: bool = True

    @property
    def whole(self) -> bool:
        """Whether the text is a whole request: every statement in it ended by a ``;``."""
        return self.readable and self.open is None


def cut(script: str) -> Cut:
    """``script`` cut into its statements; text the tokenizer cannot read yet (an open
    ``'``, ``"`` or ``/*``) is not :attr:`Cut.readable`."""
    try:
        tokens = DIALECT.tokenize(script)
    except (TokenError, RecursionError):
        return Cut((), None, readable=False)
    ended, pending = split_tokens(tokens)
    return Cut(
        tuple(Piece(script, tuple(group)) for group in ended),
        Piece(script, tuple(pending)) if pending else None,
    )
