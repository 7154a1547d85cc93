"""commdb: SQL over MPI communication traces, in the Python process.

Open a trace (an OTF2 archive, a Paraver or CSV trace, a commdb store, or
``generate:KEY=VALUE,...``) and query it with SQL; results come out as Arrow, pandas or
polars, and the analyses of the shell are methods::

    import commdb
    t = commdb.open("run/traces.otf2")
    t.sql("SELECT src, dst, sum(bytes) AS bytes FROM messages GROUP BY 1, 2").to_pandas()
    t.comm_matrix(output="size")        # numpy N x N, as Pipit's

The engine runs in this process, on its own threads, with the GIL released while a query
runs; Ctrl-C stops a query and raises KeyboardInterrupt. Nothing heavy is imported: pandas
and numpy only when a method returns their types.
"""

from __future__ import annotations

import html as _html
import os
import warnings as _warnings
from typing import Any

from . import errors
from ._native import Result, Session, __version__
from .errors import ArgumentError, ClusterError, Error, FileError, QueryError, SqlError, Warning

__all__ = [
    "open",
    "demo",
    "connect",
    "Trace",
    "Result",
    "Report",
    "Chart",
    "Error",
    "FileError",
    "ArgumentError",
    "SqlError",
    "QueryError",
    "ClusterError",
    "Warning",
    "__version__",
]

# The name of the region a profile gives to time no call covers (SQL's NULL region).
NO_CALL = "(no call)"


def open(  # noqa: A001 - commdb.open, as the shell's \open
    path: str | os.PathLike,
    *,
    name: str | None = None,
    clock_correction: str = "model",
    nodes: str | os.PathLike | None = None,
    memory_limit: str | int | None = None,
    time_unit: str | None = None,
    clock_sync: str | os.PathLike | None = None,
) -> Trace:
    """Open a trace as the default schema.

    ``path`` is anything the shell opens: an OTF2 archive (its ``traces.otf2`` or directory),
    a Paraver trace, a CSV trace, a commdb store, or ``generate:ranks=64,bad-mapping``.
    The keywords are the shell's options: ``clock_correction`` ('model', 'off' or 'clc'),
    ``nodes`` (a rank,node CSV), ``memory_limit`` for what queries hold ('8GiB', or bytes;
    default three quarters of the machine's memory), ``time_unit`` of CSV timestamps and
    ``clock_sync`` (a CSV of clock sync samples).
    """
    native = Session(
        path,
        name=name,
        clock_correction=clock_correction,
        nodes=nodes,
        memory_limit=memory_limit,
        time_unit=time_unit,
        clock_sync=clock_sync,
    )
    return Trace(native)


def demo(*, clock_correction: str = "model", memory_limit: str | int | None = None) -> Trace:
    """The shell's demo trace (``commdb --demo``): 64 ranks on 4 nodes, a 2-D stencil with
    neighbours placed on different nodes and background traffic slowing inter-node
    messages between 8 and 14 ms."""
    return Trace(Session(None, demo=True, clock_correction=clock_correction, memory_limit=memory_limit))


def connect(
    url: str,
    path: str | os.PathLike | None = None,
    *,
    name: str | None = None,
    memory_limit: str | int | None = None,
    secret_file: str | os.PathLike | None = None,
) -> Trace:
    """A session whose queries run on the cluster whose scheduler is at ``url``
    (``df://HOST:PORT``: a ``commdb scheduler`` with ``commdb executor`` processes, see
    docs/scale.md), over the commdb store at ``path`` (attach more with ``attach``).

    Every process of the cluster reads a store in place, so ``path`` must be a store
    (``commdb convert TRACE DIR`` makes one) at the same path on every machine. Views, CTEs and
    every analysis work as in an embedded session; the answers are the same. A wrong address
    raises ArgumentError, a scheduler that does not answer within 10 s ClusterError.

    A cluster started with a shared secret lets in only who presents it: ``secret_file``
    names the file holding it (readable by its owner only), else the environment variable
    ``COMMDB_CLUSTER_SECRET`` gives it; without it, or with another, ClusterError says so.
    """
    native = Session(None, memory_limit=memory_limit)
    native.connect(url, path, name=name, secret_file=secret_file)
    return Trace(native)


class Trace:
    """A session over one or more traces: the first opened is the default schema, others are
    attached under their names (``SELECT * FROM run2.messages``)."""

    def __init__(self, session: Session):
        self._session = session
        self._closed = False
        self._warned: set[tuple[str, str]] = set()
        self._warn_new(stacklevel=4)

    def _warn_new(self, stacklevel: int = 3) -> None:
        """Warn once about each kind of problem found in the default trace so far: at open,
        and when a query first builds the tables whose reading finds it (unmatched messages
        are found when the messages are matched)."""
        if not self._session.traces():
            return
        name, _, warnings = self._session.opened()
        new = [(code, count) for code, count, _ in warnings if (name, code) not in self._warned]
        if new:
            self._warned.update((name, code) for code, _ in new)
            listed = ", ".join(f"{code} ({count})" for code, count in new)
            _warnings.warn(f"trace {name}: {listed} while reading; see .warnings", Warning, stacklevel=stacklevel)

    # --- SQL -------------------------------------------------------------------------------

    def sql(self, query: str) -> Result:
        """Run one statement and return its rows (``Result``: ``to_arrow()``, ``to_pandas()``,
        ``to_polars()``, ``batches()``, or ``pyarrow.table(result)``). Every table function of
        the shell is reachable here (``SELECT * FROM comm_matrix(by => 'node')``)."""
        result = self._live().sql(query)
        self._warn_new()
        return result

    def execute(self, statement: str) -> str | None:
        """Run a statement for what it does (CREATE VIEW, ATTACH, SET, COPY); returns commdb's
        message about it, if any."""
        message = self._live().sql(statement).message
        self._warn_new()
        return message

    def attach(self, path: str | os.PathLike, name: str | None = None) -> str:
        """Open another trace as schema ``name`` (default: from its file name); returns the
        name."""
        return self._live().attach(path, name)

    def detach(self, name: str) -> None:
        """Let an attached trace go."""
        self._live().detach(name)

    @property
    def traces(self) -> list[str]:
        """The attached traces' names, the default first."""
        return self._live().traces()

    # --- facts -----------------------------------------------------------------------------

    def _facts(self, name: str | None = None) -> dict[str, Any]:
        info, rows, warnings = self._live().facts(name)
        return {"info": dict(info), "rows": dict(rows), "warnings": warnings}

    def info(self, name: str | None = None) -> dict[str, str]:
        """The trace_info row of the default trace (or of ``name``), as text."""
        return self._facts(name)["info"]

    @property
    def warnings(self) -> list[tuple[str, int, str]]:
        """What reading the default trace noticed: (code, count, an example) per kind."""
        return self._facts()["warnings"]

    def __repr__(self) -> str:
        if self._closed:
            return "<commdb.Trace (closed)>"
        names = self._session.traces()
        if not names:
            return "<commdb.Trace: no trace open>"
        name, summary, _ = self._session.opened()
        others = f"; also attached: {', '.join(names[1:])}" if len(names) > 1 else ""
        return f"<commdb.Trace {name}: {summary}{others}>"

    def _repr_html_(self) -> str:
        if self._closed:
            return "<p>commdb.Trace (closed)</p>"
        facts = self._facts()
        e = _html.escape
        out = ['<div class="commdb-trace"><table>']
        for key, value in facts["info"].items():
            out.append(f"<tr><th style='text-align:left'>{e(key)}</th><td style='text-align:left'>{e(value)}</td></tr>")
        for table, count in facts["rows"].items():
            out.append(f"<tr><th style='text-align:left'>rows in {e(table)}</th><td style='text-align:left'>{count:,}</td></tr>")
        out.append("</table>")
        if facts["warnings"]:
            out.append("<p><b>Warnings</b></p><ul>")
            for code, count, example in facts["warnings"]:
                out.append(f"<li><code>{e(code)}</code> × {count:,}: {e(example)}</li>")
            out.append("</ul>")
        out.append("</div>")
        return "".join(out)

    # --- analyses with Pipit's names ---------------------------------------------------------

    def comm_matrix(self, output: str = "size") -> Any:
        """The communication matrix as a numpy array of ranks x ranks: ``output='size'`` the
        bytes sent from row to column, ``'count'`` the messages (Pipit's ``comm_matrix``)."""
        import numpy as np

        column = {"size": "bytes", "count": "messages"}.get(output)
        if column is None:
            raise ArgumentError(f"comm_matrix: output must be 'size' or 'count', not {output!r}")
        n = self.sql("SELECT coalesce(max(rank) + 1, 0) AS n FROM ranks").to_arrow().column(0)[0].as_py()
        cells = self.sql(f"SELECT src, dst, {column} FROM comm_matrix()").to_arrow()
        matrix = np.zeros((n, n), dtype=np.int64)
        src = cells.column(0).to_numpy()
        dst = cells.column(1).to_numpy()
        matrix[src, dst] = cells.column(2).to_numpy()
        return matrix

    def message_histogram(self, bins: int = 20) -> tuple[Any, Any]:
        """Message sizes in ``bins`` equal-width bins from the smallest to the largest message,
        as numpy's ``histogram`` gives them (Pipit's ``message_histogram``): the messages per
        bin and the bins' ``bins + 1`` edges in bytes."""
        import numpy as np

        if not isinstance(bins, int) or isinstance(bins, bool) or bins < 1:
            raise ArgumentError(f"message_histogram: bins must be a positive integer, not {bins!r}")
        rows = self.sql(
            f"SELECT bin, bytes_from, bytes_to, messages FROM message_histogram(bins => {bins}) ORDER BY bin"
        ).to_arrow()
        counts = np.zeros(bins, dtype=np.int64)
        edges = np.zeros(bins + 1, dtype=np.float64)
        if rows.num_rows == 0:
            return counts, edges
        index = rows.column(0).to_numpy()
        counts[index] = rows.column(3).to_numpy()
        lo = rows.column(1).to_numpy()[0]
        hi = rows.column(2).to_numpy()[-1]
        edges[:] = np.linspace(lo, hi, bins + 1)
        edges[index] = rows.column(1).to_numpy()
        return counts, edges

    def flat_profile(self, metric: str = "exclusive") -> Any:
        """Time per region summed over all ranks, largest first, as a pandas DataFrame indexed
        by region (Pipit's ``flat_profile``). ``metric`` is 'exclusive' (time in the region
        itself) or 'inclusive' (with the calls inside it); Pipit's 'time.exc' and 'time.inc'
        are read the same. Time no call covers is the region '(no call)'."""
        return self._profile("flat_profile", metric).set_index("region")[["time_ns", "ranks", "mean_ns"]]

    def load_imbalance(self, metric: str = "exclusive") -> Any:
        """Per region, its time per rank compared across the ranks that enter it (mean, min,
        max and which rank, POP's load balance and Scalasca's imbalance percentage), as a
        pandas DataFrame indexed by region (Pipit's ``load_imbalance``)."""
        return self._profile("load_imbalance", metric).set_index("region")

    def _profile(self, caller: str, metric: str) -> Any:
        kinds = {"exclusive": "exclusive", "time.exc": "exclusive", "inclusive": "duration", "time.inc": "duration"}
        kind = kinds.get(metric)
        if kind is None:
            raise ArgumentError(f"{caller}: metric must be 'exclusive' or 'inclusive', not {metric!r}")
        frame = self.sql(
            f"SELECT coalesce(region, '{NO_CALL}') AS region, total_ns AS time_ns, * EXCLUDE (region, total_ns) "
            f"FROM load_imbalance(metric => '{kind}') ORDER BY total_ns DESC, region"
        ).to_pandas()
        return frame

    def time_profile(self, bins: int = 50) -> Any:
        """The run cut into ``bins`` equal time bins: per bin, the time the ranks spent in each
        region (innermost), as a pandas DataFrame with one row per bin, ``bin_start`` and
        ``bin_end``, and one column per region (Pipit's ``time_profile``)."""
        if not isinstance(bins, int) or isinstance(bins, bool) or bins < 1:
            raise ArgumentError(f"time_profile: bins must be a positive integer, not {bins!r}")
        long = self.sql(
            f"SELECT bin, bin_start, bin_end, coalesce(region, '{NO_CALL}') AS region, time_ns "
            f"FROM time_profile(bins => {bins}) ORDER BY bin"
        ).to_pandas()
        wide = long.pivot_table(
            index=["bin", "bin_start", "bin_end"], columns="region", values="time_ns", aggfunc="sum", fill_value=0
        )
        wide.columns.name = None
        return wide.reset_index().set_index("bin")

    # --- pictures and files ------------------------------------------------------------------

    def report(self) -> Report:
        """The HTML report of the default trace (``commdb report``), shown inline in Jupyter;
        ``.save(path)`` writes it."""
        report = Report(self._live().report(), self)
        self._warn_new()
        return report

    def chart(self, query: str, kind: str = "auto", title: str | None = None) -> Chart:
        """An SVG chart of a query's result, shown inline in Jupyter: the first column is x,
        every other numeric column a series; ``kind`` is 'auto' (the shell's choice), 'line',
        'bar' or 'heatmap'."""
        chart = Chart(self._live().chart(query, kind, title), self)
        self._warn_new()
        return chart

    def export(self, path: str | os.PathLike, format: str = "chrome") -> dict[str, int]:  # noqa: A002
        """Write the default trace for another tool: 'chrome' is Chrome trace-event JSON,
        which ui.perfetto.dev and chrome://tracing open. Returns the counts written."""
        return self._live().export(path, format)

    # --- life ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the trace's query threads; the trace cannot be queried afterwards."""
        if not self._closed:
            self._session.close()
            self._closed = True

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _live(self) -> Session:
        if self._closed:
            raise Error("the trace is closed")
        return self._session


class _Picture:
    def __init__(self, text: str, trace: Trace, what: str):
        self._text = text
        self._trace = trace
        self._what = what

    def save(self, path: str | os.PathLike) -> None:
        """Write it to ``path``, whole or not at all; an open trace's own files are refused."""
        self._trace._live().write_text(path, self._text, self._what)

    def __str__(self) -> str:
        return self._text


class Report(_Picture):
    """The one-page HTML report of a trace."""

    def __init__(self, page: str, trace: Trace):
        super().__init__(page, trace, "report")

    @property
    def html(self) -> str:
        return self._text

    def _repr_html_(self) -> str:
        # In a frame of its own, so that its styles do not touch the notebook's.
        return (
            '<iframe style="width:100%;height:900px;border:1px solid #ccc" '
            f'srcdoc="{_html.escape(self._text, quote=True)}"></iframe>'
        )

    def __repr__(self) -> str:
        return f"<commdb.Report: {len(self._text):,} characters of HTML; .save(path) writes it>"


class Chart(_Picture):
    """An SVG chart of a query's result."""

    def __init__(self, svg: str, trace: Trace):
        super().__init__(svg, trace, "chart")

    @property
    def svg(self) -> str:
        return self._text

    def _repr_svg_(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"<commdb.Chart: {len(self._text):,} characters of SVG; .save(path) writes it>"
