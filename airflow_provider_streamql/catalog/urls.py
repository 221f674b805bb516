"""Where the catalog is, and its password kept out of sight: the defaults the environment
gives (home, catalog URL, pipeline), URLs as shown (password masked), and the password a
runtime is handed in its environment or a file.

The catalog sits below the storage layout (DESIGN.md section 1), so the one path it names
itself, its embedded SQLite file in the home, is made here; the layout takes it from here."""

from __future__ import annotations

import os
import re
from urllib.parse import quote, quote_plus, unquote, unquote_plus

from sqlalchemy import make_url
from sqlalchemy.engine import URL
from sqlalchemy.exc import ArgumentError

from ..errors import CatalogError, first_line

#: the embedded catalog's file in a home
CATALOG_FILE = "catalog.db"
#: the pipeline new queries belong to when neither the caller nor ``$STREAMQL_PIPELINE`` names one
DEFAULT_PIPELINE = "default"


def default_home() -> str:
    """``$STREAMQL_HOME``, default ``./.streamql``, as an absolute path."""
    return os.path.abspath(os.environ.get("STREAMQL_HOME", ".streamql"))


def default_pipeline() -> str:
    """``$STREAMQL_PIPELINE``, default :data:`DEFAULT_PIPELINE`."""
    return os.environ.get("STREAMQL_PIPELINE", DEFAULT_PIPELINE)


def catalog_file(home: str) -> str:
    """The embedded SQLite catalog of ``home`` (its real path)."""
    return os.path.join(os.path.realpath(home), CATALOG_FILE)


def default_url(home: str | None = None) -> str:
    """``$STREAMQL_CATALOG``, else a SQLite file under the home directory."""
    url = os.environ.get("STREAMQL_CATALOG")
    if url:
        return url
    home = home or default_home()
    os.makedirs(home, exist_ok=True)
    return f"sqlite:///{catalog_file(home)}"


#: a URL's scheme (``postgresql+psycopg://``)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
#: query parameters that carry secrets (libpq takes ``?password=``)
_SECRET_PARAM = re.compile(r"([?&;][^=&;#]*(?:pass|secret|token|key)[^=&;#]*=)[^&;#]*", re.IGNORECASE)


def safe_url(url: str) -> str:
    """A catalog URL fit to show, even one that does not parse: everything between its
    scheme and its last ``@`` is credentials (a password may itself hold ``@``, ``:`` or
    ``/``), shown as ``user:***``; secret query parameters as ``***``. A string that does
    not parse, has no ``@`` but a ``:`` may be ``user:password`` without a host
    (``postgresql://u:pw/db``): only its scheme is shown. One with neither holds no
    credentials part and is shown as it is."""
    text = str(url)
    at = text.rfind("@")
    scheme = _SCHEME.match(text)
    if at < 0:
        try:
            make_url(text).port  # noqa: B018 -- parses, port included
        except Exception:
            if ":" in text:
                return f"{scheme.group(0)}..." if scheme else "(not shown: not a URL)"
    else:
        start = scheme.end() if scheme else 0
        while start < at and text[start] == "/":
            start += 1
        user, colon, _ = text[start:at].partition(":")
        text = text[:start] + (f"{user}:***" if colon else user) + text[at:]
    return _SECRET_PARAM.sub(r"\1***", text)


def without_password(url: str | URL) -> str:
    """``url`` with its password removed (``URL.set(password=None)`` keeps it: None means
    "unchanged" there), rendered in full."""
    u = make_url(url)
    return URL.create(
        u.drivername, username=u.username, password=None, host=u.host, port=u.port, database=u.database, query=u.query
    ).render_as_string(hide_password=False)


#: the credentials of any URL in a text, ``://user:password@``. As SQLAlchemy reads a URL, the
#: password runs to the next ``@``, so it may hold blanks, tabs, newlines, quotes and ``/``;
#: the mask also takes the ``@``-joined words after it (a password with a raw ``@``).
_CREDENTIALS = re.compile(r"(://[^:/@]*):[^@]*@(?:[^@\s/]*@)*")


def mask_credentials(text: str) -> str:
    """``text`` with the password of every URL in it shown as ``***`` (``user:***@host``)."""
    return _CREDENTIALS.sub(r"\1:***@", text)


def redact(text: str, url: str | None = None) -> str:
    """``text`` (a driver's error message, say) with any URL's password masked and the
    password of ``url`` masked wherever it appears, in the forms a message could carry it
    in: as it is, percent- or plus-encoded, decoded, and escaped as in a Python repr."""
    try:
        password = make_url(url).password if url else None
    except Exception:
        password = None
    if password:
        forms = {password, quote(password, safe=""), quote_plus(password), unquote(password), unquote_plus(password)}
        forms |= {repr(form)[1:-1] for form in set(forms)}
        for form in sorted(forms - {""}, key=len, reverse=True):  # the longest first: no tail left
            text = text.replace(form, "***")
    return mask_credentials(text)


def error_line(error: BaseException, url: str | None = None, limit: int | None = None) -> str:
    """The first line of a library's error (:func:`~airflow_provider_streamql.errors.first_line`)
    with passwords masked (:func:`redact`) in its whole text before the line is cut: a
    password holding a newline would otherwise leave its first part on the line."""
    return first_line(error, limit, mask=lambda text: redact(text, url))


def _env_password() -> str | None:
    """The catalog password the runtime was handed: ``$STREAMQL_CATALOG_PASSWORD``, else
    the first line of the file ``$STREAMQL_CATALOG_PASSWORD_FILE`` names (a cluster-mode
    driver gets a file or a Kubernetes secret, never a value in spark-submit's argv)."""
    password = os.environ.get("STREAMQL_CATALOG_PASSWORD")
    if password:
        return password
    path = os.environ.get("STREAMQL_CATALOG_PASSWORD_FILE")
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return f.readline().rstrip("\r\n") or None
    except OSError as e:
        raise CatalogError(
            f"cannot read the catalog password file {path!r} ($STREAMQL_CATALOG_PASSWORD_FILE): {e.strerror}"
        ) from None


def with_env_password(url: str) -> str:
    """The environment's password (see :func:`_env_password`) fills in a URL without one:
    runtimes get it in an environment variable whose name Spark redacts, or a file, not in
    a URL it would show."""
    if url.startswith("sqlite"):
        return url
    password = _env_password()
    if not password:
        return url
    try:
        parsed = make_url(url)
    except Exception:  # reported, masked, when the catalog opens it
        return url
    return url if parsed.password else parsed.set(password=password).render_as_string(hide_password=False)


def parse_url(url: str) -> URL:
    """``url`` parsed, or a CatalogError naming what is wrong with it (never its password)."""
    example = "e.g. postgresql+psycopg://user@host:5432/streamql or sqlite:////path/catalog.db"
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise CatalogError(f"catalog URL {safe_url(url)!r} is not a database URL ({example})") from None
    except ValueError:  # SQLAlchemy's int(port); its message would echo the text
        raise CatalogError(f"catalog URL {safe_url(url)!r} has a port that is not a number ({example})") from None
    if "@" in (parsed.host or ""):  # the driver would try a host holding part of the password
        raise CatalogError(
            f"catalog URL {safe_url(url)!r}: its user or password holds '@', ':' or '/'; percent-encode them (@ is %40)"
        ) from None
    return parsed
