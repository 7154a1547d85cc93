"""commdb's exceptions and warnings.

Every error commdb raises is a ``commdb.Error``; its subclass says what went wrong, and its
attributes say where, as the shell's messages do.
"""

from __future__ import annotations


class Error(Exception):
    """Something commdb could not do. The message names the file, position, table or
    argument concerned and what was expected there."""

    def __init__(self, message: str, **where):
        super().__init__(message)
        self.message = message
        for key, value in where.items():
            setattr(self, key, value)


class FileError(Error):
    """A trace or input file cannot be read, or is not what it should be.

    ``path`` is the file; ``line`` (a text file) or ``offset`` (a binary file) where the
    problem is, when one place is to blame."""

    path: str | None = None
    line: int | None = None
    offset: int | None = None


class ArgumentError(Error, ValueError):
    """An option, keyword or function argument is invalid."""


class SqlError(Error):
    """A statement is wrong where it stands: ``line`` and ``column`` (1-based) in its text."""

    line: int | None = None
    column: int | None = None


class QueryError(Error):
    """A statement failed while it ran: the memory budget was exceeded, or an analysis met
    data it cannot answer for."""


class ClusterError(Error, ConnectionError):
    """A cluster's scheduler cannot be reached or does not answer (``commdb.connect``)."""


class Warning(UserWarning):  # noqa: A001 - commdb.Warning, as commdb.Error
    """Something a function noticed while it ran (a NULL answer and why, rows left out)."""


__all__ = ["Error", "FileError", "ArgumentError", "SqlError", "QueryError", "ClusterError", "Warning"]
