"""Pass-by-pass execution: the only module that knows about schedulers and ``distributed``.

A *pass* is one ``dask.compute`` of a dictionary of lazy products (:func:`_passes.pass_graph`)
that all read the same chunks; only their small NumPy results come back.  Keeping the
passes separate (rather than one graph of several passes, or ``compute=False``) is what
bounds memory: measured on a 1.46 GB input, one graph of several passes kept the input in
worker memory (851 MiB managed, 2.5 GiB spilled), one ``compute`` per pass peaked at 14 MiB.

Where passes run
----------------
1. the ``distributed.Client`` handed in as ``scheduler=``, or else the *active* one
   (``distributed.default_client()``, e.g. the ``Client(cluster)`` of a notebook);
2. ``scheduler="tcp://host:8786"`` (``mspca fit --scheduler ADDRESS``): a running scheduler,
   connected to for this fit and disconnected after it;
3. otherwise the embedded default: Dask's local scheduler named in ``dask.config``
   (``scheduler``), else the **threaded scheduler**.  Measured with
   ``examples/choose_scheduler.py`` (numbers in ``deploy/README.md``, on a shared 2-core
   machine, so noisy): no setup was consistently faster for the fit itself, and a
   ``LocalCluster`` costs 3–10 s to start, as much as a small fit, while threads start at
   once and share the chunks without serialisation (the passes are BLAS products that
   release the GIL).  Use a cluster for more than one machine, for the dashboard, or for
   fault tolerance.

Fault tolerance
---------------
Nothing is ever scattered: the small random matrices (sketch, knockoff directions and
memberships) are drawn in NumPy from the seed and wrapped with ``da.from_array``, i.e. they
are literals *inside* the task graph that the scheduler holds.  A worker that dies (killed,
or restarted by its nanny after running out of memory) loses only results that the
scheduler can recompute from that lineage, and the recomputed tasks are the same tasks, so
the result is bitwise identical.  A pass never waits for ever: with no worker connected the
run fails after ``mspca.worker-timeout`` (Dask config, default ``"60s"``; environment
``DASK_MSPCA__WORKER_TIMEOUT``) with :class:`~mspca_dask.errors.SchedulerError`, and a
scheduler address that does not answer fails after ``mspca.connect-timeout`` (``"10s"``).

Dashboard
---------
Every task key a pass computes (not the chunk reads) starts with the pass name —
``mspca-stats``, ``mspca-pass-3``, ``mspca-location-scores``, ``mspca-output`` — see
:func:`_passes.name_pass`, and each pass is submitted inside a ``distributed.span`` of that
name, so the task stream, the task groups and the span pages tell which pass is running.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import io
import logging
import os
import sys
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import dask
import numpy as np
from dask.diagnostics import ProgressBar as _LocalProgressBar

from ._passes import Oriented, PassGraph, name_pass, pass_graph
from .errors import ChunkReadError, ParameterError, SchedulerError

__all__ = [
    "Executor",
    "PassRecord",
    "blas_threads",
    "connect",
    "connect_timeout",
    "JOB_SCHEDULERS",
    "job_scheduler",
    "local_get",
    "worker_timeout",
]

logger = logging.getLogger(__name__)

_LOCAL_SCHEDULERS = ("threads", "threading", "sync", "synchronous", "single-threaded", "processes")
#: How often a distributed pass checks that workers are still connected (seconds).
_POLL_SECONDS = 0.5


def local_get(name: str) -> Any:
    """The ``get`` function of a local scheduler's name (the name itself if dask has no such).

    ``dask.compute(scheduler="threads")`` imports ``distributed`` to look for a client before
    it maps the name to the same function (0.15 s of a threaded genomics job's single-threaded
    start, for a client that cannot exist when ``distributed`` was never imported).
    """
    return getattr(dask.base, "named_schedulers", {}).get(name, name)


def worker_timeout() -> float:
    """Seconds a pass waits for at least one worker: Dask config ``mspca.worker-timeout``."""
    return float(
        dask.utils.parse_timedelta(dask.config.get("mspca.worker-timeout", "60s"), default="s")
    )


def connect_timeout() -> float:
    """Seconds to connect to a scheduler address: Dask config ``mspca.connect-timeout``."""
    return float(
        dask.utils.parse_timedelta(dask.config.get("mspca.connect-timeout", "10s"), default="s")
    )


def blas_threads(n_chunks: int | None) -> int | None:
    """BLAS threads per task for a threaded pass over ``n_chunks`` chunks (None: no limit).

    Dask config ``mspca.blas-threads``: ``"auto"`` gives ``cores // min(threads, n_chunks)``
    (``threads`` being the threaded scheduler's pool, Dask config ``num_workers``, default
    all cores), an integer is used as is, ``None`` leaves BLAS alone.
    """
    setting = dask.config.get("mspca.blas-threads", "auto")
    if setting is None or setting is False or setting == "none":
        return None
    if setting != "auto":
        return max(1, int(setting))
    if not n_chunks:
        return None
    cores = os.cpu_count() or 1
    pool = int(dask.config.get("num_workers", None) or cores)
    return max(1, cores // max(1, min(pool, n_chunks)))


@dataclass
class PassRecord:
    """What one pass did: its name, the products it computed and how long it took."""

    name: str
    products: tuple[str, ...]
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        """``{"name", "products", "seconds"}``: the form results and job outcomes record."""
        return {"name": self.name, "products": list(self.products), "seconds": self.seconds}


@dataclass
class Executor:
    """Runs passes on the resolved scheduler and records them.

    Parameters
    ----------
    scheduler : str, distributed.Client, cluster or None
        ``None``: the active ``distributed.Client`` if there is one, else the local scheduler
        set in ``dask.config`` (``scheduler``), else Dask's threaded scheduler.  A local
        scheduler name (``"threads"``, ``"sync"``, ``"processes"``), a ``Client``, a cluster
        object (anything with ``scheduler_address``, e.g. ``LocalCluster``), or the address
        of a running scheduler (``"tcp://host:8786"``).
    progress : bool
        Show a progress bar per pass (text, on stderr: stdout carries only results), under
        the local and the distributed schedulers alike; in a Jupyter kernel also a live
        status table with the dashboard link (:meth:`_repr_html_`).

    Raises
    ------
    SchedulerError
        A scheduler address that cannot be reached within ``mspca.connect-timeout``.
    ParameterError
        A ``scheduler`` of an unknown kind.
    """

    scheduler: Any = None
    progress: bool = False
    passes: list[PassRecord] = field(default_factory=list)
    _client: Any = field(default=None, repr=False)
    _local: str = field(default="threads", repr=False)
    _current: str | None = field(default=None, repr=False)
    _display: Any = field(default=None, repr=False)
    _fraction: float = field(default=0.0, repr=False)
    _finalizer: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._client = self._resolve_client()

    # ------------------------------------------------------------------ resolution
    def _resolve_client(self) -> Any:
        s = self.scheduler
        if s is None:
            client = _active_client()
            if client is not None:
                return client
            configured = dask.config.get("scheduler", None)
            if isinstance(configured, str) and configured in _LOCAL_SCHEDULERS:
                self._local = configured
            return None
        if isinstance(s, str):
            if s in _LOCAL_SCHEDULERS:
                self._local = s
                return None
            if "://" in s or ":" in s:
                return self._connect(s)
            raise ParameterError(
                f"scheduler must be one of {list(_LOCAL_SCHEDULERS)}, a distributed.Client or a "
                f"scheduler address like 'tcp://127.0.0.1:8786' (not {s!r})"
            )
        if hasattr(s, "compute") and hasattr(s, "scheduler_info"):
            return s
        address = getattr(s, "scheduler_address", None)
        if isinstance(address, str):
            return self._connect(address)
        raise ParameterError(
            f"scheduler must be a string, a distributed.Client, a cluster or None "
            f"(not {type(s).__name__})"
        )

    def _connect(self, address: str) -> Any:
        """A Client of our own to ``address``, closed when this executor is."""
        client = connect(address)
        self._finalizer = weakref.finalize(self, _close_client, client)
        return client

    def close(self) -> None:
        """Disconnect a client this executor opened (a client handed in is left open)."""
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def on_workers(self, func: Callable[[], Any]) -> None:
        """Call ``func()`` in this process and, on a cluster, in every worker process.

        For per-process state that a pass's tasks keep between tasks (e.g. the genomics
        statistics pass's reused buffers) and that must be freed when the pass is over.
        """
        func()
        if self._client is not None:
            self._client.run(func)

    # ------------------------------------------------------------------ description
    @property
    def distributed(self) -> bool:
        """Whether passes run on a ``distributed`` cluster."""
        return self._client is not None

    @property
    def shares_memory(self) -> bool:
        """Whether a pass's tasks run in this process (a local threaded or synchronous
        scheduler), so that an object they change is seen here, not a copy of it."""
        return self._client is None and self._local != "processes"

    @property
    def dashboard_link(self) -> str | None:
        """The Dask dashboard of the cluster, or None (local scheduler, or no dashboard)."""
        if self._client is None:
            return None
        try:
            link = self._client.dashboard_link
        except Exception:  # noqa: BLE001 - no dashboard (bokeh missing, or disabled)
            return None
        return str(link) if link else None

    @property
    def description(self) -> str:
        if self._client is not None:
            return f"distributed ({self._client.scheduler.address})"
        return self._local

    @property
    def n_passes(self) -> int:
        return len(self.passes)

    def __repr__(self) -> str:
        where = self.description
        link = self.dashboard_link
        lines = [f"MS-PCA fit on {where}" + (f", dashboard {link}" if link else "")]
        if self._current is not None:
            lines.append(f"running {self._current} (pass {self.n_passes + 1})")
        for i, p in enumerate(self.passes, 1):
            lines.append(f"  {i:>3}  {p.name:<24} {p.seconds:8.2f} s  {', '.join(p.products)}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """Where the fit runs (with the dashboard link), what runs now, and every pass so far."""
        esc = html.escape
        link = self.dashboard_link
        where = esc(self.description)
        if link:
            where += (
                f' &mdash; <a href="{esc(link)}" target="_blank">Dask dashboard</a> '
                f"(task groups are named after the passes)"
            )
        elif self._client is None:
            where += " (no dashboard: start a distributed.Client to watch the fit)"
        status = (
            f"running <code>{esc(self._current)}</code> (pass {self.n_passes + 1}) "
            f"<progress value='{self._fraction:.3f}' max='1'></progress> "
            f"{int(100 * self._fraction)}%"
            if self._current is not None
            else f"{self.n_passes} pass(es) done, {self._total_seconds():.2f} s"
        )
        rows = "".join(
            f"<tr><td>{i}</td><td><code>{esc(p.name)}</code></td>"
            f"<td style='text-align:right'>{p.seconds:.2f}</td>"
            f"<td>{esc(', '.join(p.products))}</td></tr>"
            for i, p in enumerate(self.passes, 1)
        )
        return (
            f"<div><strong>MS-PCA fit</strong> on {where}<br>{status}"
            f"<table><thead><tr><th>#</th><th>pass</th><th>seconds</th><th>products</th>"
            f"</tr></thead><tbody>{rows}</tbody></table></div>"
        )

    def _total_seconds(self) -> float:
        return float(sum(p.seconds for p in self.passes))

    # ------------------------------------------------------------------ running
    def run_pass(
        self, data: Oriented, name: str, *, single: bool = False, **products: Any
    ) -> dict[str, np.ndarray]:
        """One read of ``data`` computing ``products`` (:func:`~mspca_dask._passes.pass_graph`).

        This is the :class:`~mspca_dask._engine.spectra.PassRunner` protocol of the fit.
        """
        return self.run(name, pass_graph(data, single=single, **products))

    def run(self, name: str, graph: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Compute one pass and return its products as NumPy arrays.

        Raises
        ------
        ChunkReadError
            A chunk of the input could not be read.
        SchedulerError
            No worker for ``mspca.worker-timeout``, the scheduler went away, or a task
            killed every worker it ran on (e.g. out of memory).
        """
        keys = tuple(graph)
        named = _named(graph, name)
        arrays = list(named.values())
        optimize = named.named is None
        self._current = name
        self._fraction = 0.0
        self._refresh_display()
        t0 = time.perf_counter()
        try:
            if self._client is not None:
                values = self._run_distributed(name, arrays, optimize)
            else:
                with self._local_progress(name), self._blas_limit(named.n_chunks):
                    values = dask.compute(
                        *arrays, scheduler=local_get(self._local), optimize_graph=optimize
                    )
        except (ChunkReadError, SchedulerError):
            raise
        except OSError as err:
            raise ChunkReadError(f"pass {name!r} could not read the data: {err}") from err
        finally:
            self._current = None
        self.passes.append(PassRecord(name=name, products=keys, seconds=time.perf_counter() - t0))
        self._refresh_display()
        # C order and aligned, whatever the transport delivered: the driver-side linear algebra
        # then takes the same BLAS paths on every run (bitwise reproducible results; NumPy
        # multiplies misaligned arrays without BLAS, in a different summation order).
        return {
            k: np.require(v, requirements=["C", "A"]) for k, v in zip(keys, values, strict=True)
        }

    def _run_distributed(self, name: str, arrays: list[Any], optimize: bool) -> list[Any]:
        from distributed import CancelledError, KilledWorker
        from distributed.client import _wait  # distributed.wait, on *this* client
        from distributed.comm.core import CommClosedError

        client = self._client
        address = client.scheduler.address
        limit = worker_timeout()
        self._wait_for_workers(address, limit)
        with _span(name):
            futures = client.compute(arrays, optimize_graph=optimize)
        bar = self._distributed_progress(name, futures) if self.progress else None
        try:
            no_workers_since: float | None = None
            while True:
                try:
                    client.sync(_wait, futures, timeout=_POLL_SECONDS)
                    break
                except TimeoutError:
                    pass
                n_workers = self._n_workers(address)
                if n_workers:
                    no_workers_since = None
                    continue
                now = time.monotonic()
                no_workers_since = no_workers_since or now
                if now - no_workers_since > limit:
                    raise SchedulerError(
                        f"pass {name!r}: every Dask worker of the scheduler at {address} has "
                        f"been gone for {limit:g} s; the fit cannot go on. Start or restart "
                        f"workers (`dask worker {address}`), or raise the Dask config "
                        f"mspca.worker-timeout."
                    )
            if bar is not None:
                with contextlib.suppress(Exception):
                    bar.result(timeout=2)
            return list(client.gather(futures))
        except KilledWorker as err:
            raise SchedulerError(
                f"pass {name!r}: a task killed every worker it ran on ({err}). The usual cause "
                f"is workers running out of memory: give them more memory, or use smaller "
                f"chunks."
            ) from err
        except CommClosedError as err:
            raise SchedulerError(
                f"pass {name!r}: lost the connection to the Dask scheduler at {address}: {err}"
            ) from err
        except CancelledError as err:
            raise SchedulerError(
                f"pass {name!r} was cancelled: the connection to the Dask scheduler at "
                f"{address} was lost, or the cluster was shut down."
            ) from err
        finally:
            pending = [f for f in futures if not f.done()]
            if pending:
                with contextlib.suppress(Exception):
                    client.cancel(pending)
            if bar is not None:
                bar.cancel()

    def _wait_for_workers(self, address: str, limit: float) -> None:
        try:
            self._client.wait_for_workers(1, timeout=limit)
        except (TimeoutError, OSError) as err:
            raise SchedulerError(
                f"no Dask worker joined the scheduler at {address} within {limit:g} s. Start "
                f"workers with `dask worker {address}` (or scale the cluster), or raise the "
                f"Dask config mspca.worker-timeout."
            ) from err

    def _n_workers(self, address: str) -> int:
        try:
            return len(self._client.nthreads())
        except (TimeoutError, OSError) as err:
            raise SchedulerError(
                f"lost the connection to the Dask scheduler at {address}: {err}"
            ) from err

    def _blas_limit(self, n_chunks: int | None) -> contextlib.AbstractContextManager[Any]:
        """Limit BLAS threads while a *threaded* pass runs (see the module notes)."""
        if self._local not in ("threads", "threading"):
            return contextlib.nullcontext()
        limit = blas_threads(n_chunks)
        if limit is None:
            return contextlib.nullcontext()
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:  # pragma: no cover - scikit-learn depends on threadpoolctl
            return contextlib.nullcontext()
        return threadpool_limits(limits=limit, user_api="blas")

    # ------------------------------------------------------------------ progress
    @contextlib.contextmanager
    def _local_progress(self, name: str) -> Iterator[None]:
        if not self.progress:
            yield
            return
        with _LocalBar(self):
            yield

    def _distributed_progress(self, name: str, futures: list[Any]) -> Any:
        """Start a bar fed by the scheduler; returns its ``concurrent.futures.Future``."""
        client = self._client
        try:
            bar = _distributed_bar(self, futures, client.scheduler.address)
            return asyncio.run_coroutine_threadsafe(bar.listen(), client.loop.asyncio_loop)
        except Exception as err:  # noqa: BLE001 - a progress bar must never fail a fit
            logger.debug("no distributed progress bar: %s", err)
            return None

    def _draw(self, frac: float, elapsed: float) -> None:
        """Progress of the running pass: the live table in a kernel, else a text bar."""
        self._fraction = frac
        if self._display is not None:
            self._refresh_display()
            return
        bar = "#" * int(_BAR_WIDTH * frac)
        msg = (
            f"\r{self._current or '':<22} [{bar:<{_BAR_WIDTH}}] | {int(100 * frac):3d}% "
            f"Completed | {_format_time(elapsed)}"
        )
        with contextlib.suppress(ValueError):  # stderr closed
            sys.stderr.write(msg)
            sys.stderr.flush()

    def _draw_stop(self) -> None:
        if self._display is None:
            with contextlib.suppress(ValueError):
                sys.stderr.write("\n")
                sys.stderr.flush()

    def _refresh_display(self) -> None:
        """In a Jupyter kernel with ``progress=True``: show/update the live status table."""
        if not self.progress or not _in_kernel():
            return
        try:
            from IPython.display import display

            if self._display is None:
                self._display = display(self, display_id=True)
            else:
                self._display.update(self)
        except Exception as err:  # noqa: BLE001 - display is cosmetic
            logger.debug("no live display: %s", err)


# ---------------------------------------------------------------------------- helpers


def connect(address: str) -> Any:
    """A ``distributed.Client`` to the scheduler at ``address`` (the one connection rule).

    Waits :func:`connect_timeout` seconds (Dask config ``mspca.connect-timeout``).

    Raises
    ------
    SchedulerError
        Nothing answered at ``address`` in time (refused, bad host, timeout).
    """
    from distributed import Client

    timeout = connect_timeout()
    try:
        return Client(address, timeout=timeout, set_as_default=False)
    except (TimeoutError, OSError) as err:  # TimeoutError, refused, bad host
        raise SchedulerError(
            f"could not connect to the Dask scheduler at {address!r} within {timeout:g} s "
            f"({type(err).__name__}: {err}). Is `dask scheduler` running there? Raise the "
            f"wait with the Dask config mspca.connect-timeout."
        ) from err


#: Scheduler names a job config may give besides an address: Dask's local schedulers, and a
#: local cluster of worker processes started for the job.
JOB_SCHEDULERS = ("threads", "sync", "processes", "local-cluster")


@contextlib.contextmanager
def job_scheduler(scheduler: str, workers: int) -> Iterator[Any]:
    """What every pass of one job runs on, for the length of the job.

    Parameters
    ----------
    scheduler : str
        One of :data:`JOB_SCHEDULERS`, or a scheduler address (``"tcp://host:8786"``).
    workers : int
        Worker processes (one thread each) of a ``"local-cluster"``.

    Yields
    ------
    str or distributed.Client
        A local scheduler's name, or a client (to the job's own local cluster, or connected
        to the address by :func:`connect`), closed when the job ends.
    """
    if scheduler == "local-cluster":
        from distributed import Client, LocalCluster

        with (
            LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            Client(cluster) as client,
        ):
            yield client
    elif "://" in scheduler:
        with connect(scheduler) as client:
            yield client
    else:
        yield scheduler


def _active_client() -> Any:
    """The active ``distributed.Client``, or None (without importing distributed needlessly)."""
    if "distributed" not in sys.modules:  # no Client can exist without it being imported
        return None
    from distributed import default_client

    try:
        return default_client()
    except ValueError:
        return None


def _close_client(client: Any) -> None:
    with contextlib.suppress(Exception):
        client.close(timeout=5)


def _named(graph: Mapping[str, Any], name: str) -> PassGraph:
    """The pass graph with task keys named after the pass (unchanged if that fails)."""
    if isinstance(graph, PassGraph) and graph.named == name:
        return graph
    try:
        return name_pass(graph, name)
    except Exception as err:  # noqa: BLE001 - naming is cosmetic; never fail a fit for it
        logger.debug("could not name the tasks of pass %r: %s", name, err)
        plain = PassGraph(graph)
        return plain


@contextlib.contextmanager
def _span(name: str) -> Iterator[None]:
    try:
        from distributed import span
    except ImportError:  # pragma: no cover - old distributed
        yield
        return
    with span(name):
        yield


def _in_kernel() -> bool:
    if "IPython" not in sys.modules:
        return False
    from IPython import get_ipython

    return getattr(get_ipython(), "kernel", None) is not None


_BAR_WIDTH = 40


def _format_time(seconds: float) -> str:
    from dask.utils import format_time

    return str(format_time(seconds))


class _LocalBar(_LocalProgressBar):
    """dask.diagnostics.ProgressBar drawing through :meth:`Executor._draw`, for every pass."""

    def __init__(self, executor: Executor) -> None:
        super().__init__(minimum=0, dt=0.1, out=io.StringIO())
        self._executor = executor

    def _draw_bar(self, frac: float, elapsed: float) -> None:
        self._executor._draw(frac, elapsed)

    def _finish(self, dsk: Any, state: Any, errored: bool) -> None:
        super()._finish(dsk, state, errored)
        self._executor._draw_stop()


def _distributed_bar(executor: Executor, futures: list[Any], address: str) -> Any:
    """distributed's scheduler-fed progress bar, drawing through :meth:`Executor._draw`."""
    from distributed.diagnostics.progressbar import TextProgressBar

    class _Bar(TextProgressBar):
        def _draw_bar(self, remaining: int, all: int, **kwargs: Any) -> None:  # noqa: A002
            executor._draw((1 - remaining / all) if all else 1.0, self.elapsed)

        def _draw_stop(self, **kwargs: Any) -> None:
            executor._draw_stop()

    return _Bar(futures, scheduler=address, start=False)
