"""mspca_dask on real Dask clusters: scheduler resolution, fault tolerance, reproducibility,
task names, progress and notebook displays, remote stores.

Real processes: a ``dask scheduler`` and a ``dask worker`` (two nanny-managed worker
processes) are started on 127.0.0.1 by the ``real_cluster`` fixture; fits run through them by
address, a busy worker is killed with SIGKILL, another runs out of memory and is restarted by
its nanny.  Every wait is bounded (``pytest.mark.timeout`` on every test, explicit timeouts on
every cluster call) so that a hung cluster fails the test instead of stalling CI.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
from distributed import Client, LocalCluster, get_task_stream
from distributed.utils import key_split, key_split_group

import mspca_dask
from mspca_dask import SchedulerError
from mspca_dask._execution import Executor, blas_threads
from mspca_dask._passes import name_pass, orient, pass_graph
from mspca_dask.testing import paper_setting

pytestmark = [pytest.mark.timeout(120), pytest.mark.integration]

K = 4
#: Every array of a result that must not change with the workers, the chunking or a failure.
ARRAYS = (
    "eigenvalues",
    "knockoff_eigenvalues_all",
    "stable",
    "candidate",
    "displacement",
    "eigenvector_overlap",
    "eigenvectors",
    "scores",
    "location",
)
SCALARS = ("noise_variance", "threshold", "knockoff_strength", "mp_edge")
WORKER_MEMORY = 600 * 2**20  # bytes per worker process of the real cluster
CHUNKS = ((50,) * 8, (120,))


@pytest.fixture(scope="module")
def model():
    return paper_setting(pi1=0.1, n_samples=400, n_features=120, random_state=11)


@pytest.fixture(scope="module")
def reference(model):
    """The fit on Dask's threaded scheduler in this process (the exact solver: d is small)."""
    return mspca_dask.fit(model.to_dask(CHUNKS), n_components=K, scheduler="threads")


@pytest.fixture(scope="module")
def reference_randomized(model):
    return mspca_dask.fit(
        model.to_dask(CHUNKS), n_components=K, solver="randomized", scheduler="threads"
    )


def assert_same_result(a, b, *, rtol=0.0, atol=0.0, same_passes=True):
    """Equal arrays (bitwise with the default tolerances); eigenvectors and scores up to the
    deterministic signs, which are themselves compared."""
    for name in ARRAYS:
        x, y = getattr(a, name), getattr(b, name)
        if x is None or y is None:
            assert x is None and y is None, name
            continue
        if rtol == atol == 0.0:
            np.testing.assert_array_equal(x, y, err_msg=name)
        else:
            np.testing.assert_allclose(x, y, rtol=rtol, atol=atol, err_msg=name)
    for name in SCALARS:
        x, y = getattr(a, name), getattr(b, name)
        assert x == y if rtol == atol == 0.0 else abs(x - y) <= atol + rtol * abs(y), name
    if same_passes:
        assert a.n_passes == b.n_passes


# ---------------------------------------------------------------------------- data sources


def _slow_block(model, delay, block_info=None):
    """A chunk of ``model`` that takes ``delay`` seconds to read (a slow store)."""
    (r0, r1), (c0, c1) = block_info[None]["array-location"]
    time.sleep(delay)
    return np.ascontiguousarray(model.rows(r0, r1)[:, c0:c1])


def slow_array(model, delay):
    return da.map_blocks(
        _slow_block,
        model,
        delay,
        chunks=CHUNKS,
        dtype=float,
        meta=np.empty((0, 0)),
        name=f"slow-read-{dask.base.tokenize(model, delay, CHUNKS)}",
    )


def _greedy_block(model, marker, block_info=None):
    """A chunk of ``model``; the first read of chunk 0 allocates far more than a worker may use.

    The marker file is written first, so the read that the nanny's restart leads to (on any
    worker) returns the data normally.
    """
    (r0, r1), (c0, c1) = block_info[None]["array-location"]
    if r0 == 0 and not os.path.exists(marker):
        Path(marker).write_text(str(os.getpid()))
        hog = np.ones(3 * WORKER_MEMORY // 8)  # touched pages: 3x the worker's memory limit
        time.sleep(20)  # the nanny terminates this process long before
        del hog
    return np.ascontiguousarray(model.rows(r0, r1)[:, c0:c1])


def greedy_array(model, marker):
    return da.map_blocks(
        _greedy_block,
        model,
        str(marker),
        chunks=CHUNKS,
        dtype=float,
        meta=np.empty((0, 0)),
        name=f"greedy-read-{dask.base.tokenize(model, str(marker), CHUNKS)}",
    )


# ---------------------------------------------------------------------------- clusters


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen, timeout: float = 15) -> None:
    """SIGTERM then, after ``timeout`` seconds, SIGKILL one process we started."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)


@pytest.fixture(scope="module")
def real_cluster(tmp_path_factory) -> Iterator[dict]:
    """``dask scheduler`` + ``dask worker --nanny --nworkers 2`` on 127.0.0.1, as processes."""
    work = tmp_path_factory.mktemp("cluster")
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    # The workers import this module to run the data generators below.
    path = os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONWARNINGS": "ignore",
        "PYTHONPATH": path,
    }
    log = open(work / "cluster.log", "w")  # noqa: SIM115 - closed at teardown
    dask_cli = [sys.executable, "-m", "dask"]
    procs = [
        subprocess.Popen(
            [
                *dask_cli,
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--dashboard-address",
                "127.0.0.1:0",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=work,
        )
    ]
    try:
        procs.append(
            subprocess.Popen(
                [
                    *dask_cli,
                    "worker",
                    address,
                    "--nanny",
                    "--nworkers",
                    "2",
                    "--nthreads",
                    "1",
                    "--memory-limit",
                    str(WORKER_MEMORY),
                    "--host",
                    "127.0.0.1",
                    "--no-dashboard",
                    "--local-directory",
                    str(work),
                    "--death-timeout",
                    "60",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=work,
            )
        )
        client = Client(address, timeout=60, set_as_default=False)
        try:
            client.wait_for_workers(2, timeout=60)
            yield {"address": address, "client": client, "log": work / "cluster.log"}
        finally:
            client.close(timeout=10)
    finally:
        for proc in reversed(procs):
            _stop(proc)
        log.close()


def _worker_pids(client) -> dict[str, int]:
    return client.run(os.getpid, wait=True)


def _wait_for_workers(client, n: int, timeout: float = 60) -> None:
    """Block until ``n`` workers are connected (the nanny restarted the lost ones)."""
    client.wait_for_workers(n, timeout=timeout)


@contextlib.contextmanager
def local_cluster(n_workers: int, **kw) -> Iterator[LocalCluster]:
    """In-process workers (threads): quick to start, real scheduler and comms."""
    with LocalCluster(
        n_workers=n_workers,
        threads_per_worker=1,
        processes=False,
        dashboard_address="127.0.0.1:0",
        host="127.0.0.1",
        protocol="tcp",
        **kw,
    ) as cluster:
        yield cluster


# ---------------------------------------------------------------------------- resolution


def test_executor__defaults_to_threads_without_a_client():
    ex = Executor()
    assert ex.description == "threads" and not ex.distributed and ex.dashboard_link is None


def test_executor__uses_the_local_scheduler_of_dask_config():
    with dask.config.set(scheduler="sync"):
        assert Executor().description == "sync"


def test_executor__local_pass_never_imports_distributed():
    """``dask.compute(scheduler="threads")`` imports distributed to look for a client."""
    code = (
        "import sys, dask.array as da\n"
        "from mspca_dask._execution import Executor\n"
        "out = Executor('threads').run('p', {'x': da.ones(6, chunks=2).sum()})\n"
        "print(float(out['x']), 'distributed' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["6.0", "False"]


def test_executor__uses_the_active_client():
    with local_cluster(1) as cluster, Client(cluster) as client:
        ex = Executor()
        assert ex._client is client
        assert ex.description == f"distributed ({cluster.scheduler_address})"
        assert ex.dashboard_link == client.dashboard_link


def test_executor__connects_to_an_address_and_closes_its_client(model):
    with local_cluster(1) as cluster:
        ex = Executor(scheduler=cluster.scheduler_address)
        client = ex._client
        assert ex.distributed and client.status == "running"
        ex.close()
        assert client.status == "closed"
        # a Client object handed in is used and left open
        with Client(cluster, set_as_default=False) as own:
            ex = Executor(scheduler=own)
            ex.close()
            assert own.status == "running"


_ON_WORKERS_CALLS: list[int] = []


def _record_call() -> None:
    _ON_WORKERS_CALLS.append(threading.get_ident())


def test_executor__on_workers_calls_here_and_in_every_worker():
    # In-process workers share this module's list: one call here, one per worker.
    _ON_WORKERS_CALLS.clear()
    Executor().on_workers(_record_call)
    assert len(_ON_WORKERS_CALLS) == 1
    _ON_WORKERS_CALLS.clear()
    with local_cluster(2) as cluster, Executor(scheduler=cluster.scheduler_address) as ex:
        ex.on_workers(_record_call)
    assert len(_ON_WORKERS_CALLS) == 3


def test_executor__accepts_a_cluster_object():
    with local_cluster(1) as cluster:
        with Executor(scheduler=cluster) as ex:
            assert ex.description == f"distributed ({cluster.scheduler_address})"


def test_fit__unreachable_scheduler_raises_scheduler_error_after_the_timeout():
    address = f"tcp://127.0.0.1:{_free_port()}"
    t0 = time.monotonic()
    with (
        dask.config.set({"mspca.connect-timeout": "1s"}),
        pytest.raises(SchedulerError, match="could not connect to the Dask scheduler"),
    ):
        mspca_dask.fit(np.eye(20, 10) + 1, n_components=1, scheduler=address)
    assert time.monotonic() - t0 < 20


def test_fit__no_workers_raises_scheduler_error_after_the_timeout(model):
    with local_cluster(0) as cluster, dask.config.set({"mspca.worker-timeout": "1s"}):
        t0 = time.monotonic()
        with pytest.raises(SchedulerError, match="no Dask worker joined the scheduler"):
            mspca_dask.fit(model.to_dask(CHUNKS), n_components=K, scheduler=cluster)
        assert time.monotonic() - t0 < 20


def test_fit__workers_lost_mid_fit_raise_scheduler_error_instead_of_hanging(model):
    with local_cluster(1) as cluster, Client(cluster, set_as_default=False) as client:
        stop = threading.Event()

        def retire_when_busy():
            while not stop.is_set():
                if any(client.processing().values()):
                    cluster.scale(0)
                    return
                time.sleep(0.02)

        killer = threading.Thread(target=retire_when_busy, daemon=True)
        killer.start()
        t0 = time.monotonic()
        try:
            with (
                dask.config.set({"mspca.worker-timeout": "1s"}),
                pytest.raises(SchedulerError, match="worker"),
            ):
                mspca_dask.fit(
                    slow_array(model, 0.05), n_components=K, scheduler=client, solver="randomized"
                )
        finally:
            stop.set()
            killer.join(timeout=10)
        assert time.monotonic() - t0 < 30


def test_executor__rejects_unknown_schedulers():
    with pytest.raises(mspca_dask.ParameterError, match="scheduler must be one of"):
        Executor(scheduler="gpu")
    with pytest.raises(mspca_dask.ParameterError, match="scheduler must be a string"):
        Executor(scheduler=3)


# ---------------------------------------------------------------------------- real processes


def _n_clients(client) -> int:
    return client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.clients))


def test_fit__through_a_scheduler_address_matches_the_threaded_fit(real_cluster, model, reference):
    before = _n_clients(real_cluster["client"])
    res = mspca_dask.fit(model.to_dask(CHUNKS), n_components=K, scheduler=real_cluster["address"])
    assert res.params["scheduler"] == f"distributed ({real_cluster['address']})"
    assert_same_result(res, reference, rtol=1e-10, atol=1e-10)
    # the client fit opened for the address is closed again (scheduler-side bookkeeping of a
    # closed client takes a moment)
    deadline = time.monotonic() + 10
    while _n_clients(real_cluster["client"]) > before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _n_clients(real_cluster["client"]) == before


def test_fit__sigkill_of_a_busy_worker_gives_the_bitwise_identical_result(real_cluster, model):
    client, address = real_cluster["client"], real_cluster["address"]
    _wait_for_workers(client, 2)
    X = slow_array(model, 0.03)
    fit_kw = {"n_components": K, "solver": "randomized", "scheduler": address}
    undisturbed = mspca_dask.fit(X, **fit_kw)
    assert undisturbed.n_passes >= 4

    pids = _worker_pids(client)
    killed: dict[str, int] = {}
    stop = threading.Event()

    def kill_a_busy_worker():
        """SIGKILL a worker while it runs tasks of a Krylov pass and holds results."""
        while not stop.is_set():
            processing = client.processing()
            holding = client.has_what()
            for addr, keys in processing.items():
                in_pass = [k for k in keys if key_split_group(k).startswith("mspca-pass-")]
                if in_pass and holding.get(addr) and addr in pids:
                    os.kill(pids[addr], signal.SIGKILL)
                    killed[addr] = pids[addr]
                    return
            time.sleep(0.01)

    killer = threading.Thread(target=kill_a_busy_worker, daemon=True)
    killer.start()
    try:
        disturbed = mspca_dask.fit(X, **fit_kw)
    finally:
        stop.set()
        killer.join(timeout=10)
    assert killed, "no worker was caught busy in a Krylov pass"
    assert_same_result(disturbed, undisturbed)  # bitwise
    # the nanny brought the killed worker back
    _wait_for_workers(client, 2)
    assert set(_worker_pids(client).values()) != set(pids.values())


def test_fit__worker_out_of_memory_is_restarted_by_its_nanny_and_the_fit_completes(
    real_cluster, model, reference, tmp_path
):
    client, address = real_cluster["client"], real_cluster["address"]
    _wait_for_workers(client, 2)
    pids = _worker_pids(client)
    marker = tmp_path / "hog.pid"
    res = mspca_dask.fit(greedy_array(model, marker), n_components=K, scheduler=address)
    assert marker.exists(), "the greedy chunk was never read"
    hog_pid = int(marker.read_text())
    assert hog_pid in pids.values()
    _wait_for_workers(client, 2)
    assert hog_pid not in _worker_pids(client).values(), "the greedy worker was not restarted"
    assert_same_result(res, reference, rtol=1e-10, atol=1e-10)


def test_fit__file_url_on_real_workers(real_cluster, model, reference, tmp_path):
    store = tmp_path / "m.zarr"
    model.write_zarr(store, chunks=(50, None))
    res = mspca_dask.fit(f"file://{store}", n_components=K, scheduler=real_cluster["address"])
    assert_same_result(res, reference, rtol=1e-10, atol=1e-10)


def test_cli__fit_with_scheduler_address(real_cluster, model, reference, tmp_path):
    store, out = tmp_path / "m.zarr", tmp_path / "r.zarr"
    model.write_zarr(store, chunks=(50, None))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mspca_dask",
            "fit",
            str(store),
            "--components",
            str(K),
            "--out",
            str(out),
            "--scheduler",
            real_cluster["address"],
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert proc.returncode == 0, proc.stderr
    assert "result written to" in proc.stdout
    assert_same_result(mspca_dask.open_result(out), reference, rtol=1e-10, atol=1e-10)


# ---------------------------------------------------------------------------- reproducibility


@pytest.mark.parametrize("n_workers", [1, 2, 4])
def test_fit__same_seed_same_result_across_workers_and_chunkings(
    model, reference, reference_randomized, n_workers
):
    """Exact solver: row chunks, irregular row chunks, and the dual orientation (chunks that
    span all samples); randomized solver: the two row chunkings (the dual orientation sketches
    another space, so its randomized iterates differ within the certified tolerance)."""
    rows, irregular, dual = CHUNKS, ((130, 70, 200), (120,)), ((400,), (60, 60))
    cases = [("exact", c, reference) for c in (rows, irregular, dual)]
    cases += [("randomized", c, reference_randomized) for c in (rows, irregular)]
    with local_cluster(n_workers) as cluster, Client(cluster, set_as_default=False) as client:
        for solver, chunks, ref in cases:
            res = mspca_dask.fit(
                model.to_dask(chunks), n_components=K, solver=solver, scheduler=client
            )
            # the dual orientation locates the centre in one pass fewer (samples are the
            # operator side there), so only the pass count may differ
            assert_same_result(res, ref, rtol=1e-10, atol=1e-10, same_passes=chunks is not dual)


def test_fit__memory_url_on_threads_and_in_process_workers(model, reference):
    url = f"memory://mspca-test-{uuid.uuid4().hex}/m.zarr"
    model.write_zarr(url, chunks=(50, None))
    assert_same_result(mspca_dask.fit(url, n_components=K), reference, rtol=1e-10, atol=1e-10)
    with local_cluster(2) as cluster:  # in-process workers share the memory filesystem
        res = mspca_dask.fit(url, n_components=K, scheduler=cluster)
    assert_same_result(res, reference, rtol=1e-10, atol=1e-10)


# ---------------------------------------------------------------------------- lineage and names


def test_pass_graph__random_matrices_are_graph_literals_not_scattered_data(model):
    """Everything a pass needs is in its graph: a lost result is recomputed from lineage."""
    from dask._task_spec import DataNode

    data = orient(model.to_dask(CHUNKS))
    rng = np.random.default_rng(0)
    graph = pass_graph(
        data,
        name="mspca-pass-2",
        krylov=rng.standard_normal((120, 3)),
        side=rng.standard_normal((400, 2)),
    )
    dsk = dict(da.Array.__dask_graph__(graph["krylov"]))
    dsk.update(dict(graph["side"].__dask_graph__()))
    literals = [node for node in dsk.values() if isinstance(node, DataNode)]
    assert literals, "the small matrices should be literals inside the graph"
    assert not any(type(node.value).__name__ == "Future" for node in literals)


def test_name_pass__prefixes_every_key_including_the_reads(model):
    X = model.to_dask(CHUNKS)
    data = orient(X)
    plain = pass_graph(data, stats=True, krylov=np.ones((120, 2)))
    named = name_pass(plain, "mspca-pass-3")
    keys = set(named["krylov"].__dask_graph__()) | set(named["row_sum"].__dask_graph__())
    assert all(key_split_group(k).startswith("mspca-pass-3-") for k in keys)
    assert {key_split(k) for k in keys} == {"mspca-pass"}
    dsk = dict(named["krylov"].__dask_graph__())
    kernels = [k for k in keys if key_split_group(k).startswith("mspca-pass-3-pass_kernel")]
    assert len(kernels) == X.numblocks[0]
    # every chunk read once, under the pass's name, inside the task that multiplies it: the
    # chunk is never a task result a worker holds or sends to another
    assert not any(key_split_group(k) == f"mspca-pass-3-{X.name}" for k in keys)
    inner = [key for k in kernels for key in dsk[k].args[0]]
    reads = {k for k in inner if key_split_group(k) == f"mspca-pass-3-{X.name}"}
    assert len(reads) == X.numblocks[0]
    # a second pass over the same data shares no key with the first
    other = name_pass(plain, "mspca-pass-4")
    assert not keys & set(other["krylov"].__dask_graph__())
    for product in plain:
        np.testing.assert_array_equal(
            named[product].compute(optimize_graph=False), plain[product].compute()
        )


def test_fit__task_groups_on_the_dashboard_are_named_after_the_passes(model):
    with local_cluster(2) as cluster, Client(cluster, set_as_default=False) as client:
        with get_task_stream(client) as stream:
            res = mspca_dask.fit(
                model.to_dask(CHUNKS), n_components=K, solver="randomized", scheduler=client
            )
        groups = {key_split_group(t["key"]) for t in stream.data}
        spans = client.run_on_scheduler(
            lambda dask_scheduler: sorted(
                {s.name[-1] for s in dask_scheduler.extensions["spans"].spans.values()}
            )
        )
    computed = {g for g in groups if g.startswith("mspca-")}
    # ``Client.compute`` joins the chunks of a multi-chunk product in one task of its own
    finalize = {g for g in groups if g.startswith("finalize-")}
    assert groups == computed | finalize
    # the randomized solver's scores come from its Krylov basis: no output pass, and no pass
    # for the location step's scores either
    for name in ("mspca-stats", "mspca-pass-3"):
        assert any(g.startswith(name + "-") for g in computed), (name, sorted(groups))
    assert not any(g.startswith(("mspca-output", "mspca-location-scores")) for g in computed)
    # every pass reads its chunks inside its kernel's tasks, which carry the pass name
    assert f"mspca-stats-{model.to_dask(CHUNKS).name}" not in computed
    assert any(g.startswith("mspca-stats-pass_kernel-") for g in computed)
    pass_spans = [s for s in spans if s.startswith("mspca-")]
    assert {"mspca-stats", "mspca-pass-3"} <= set(pass_spans)
    assert len(pass_spans) == res.n_passes


# ---------------------------------------------------------------------------- progress, display


@pytest.mark.parametrize("where", ["threads", "distributed"])
def test_fit__progress_bar_under_local_and_distributed_schedulers(model, capsys, where):
    with contextlib.ExitStack() as stack:
        sched = "threads"
        if where == "distributed":
            sched = stack.enter_context(
                Client(stack.enter_context(local_cluster(1)), set_as_default=False)
            )
        res = mspca_dask.fit(model.to_dask(CHUNKS), n_components=K, scheduler=sched, progress=True)
    captured = capsys.readouterr()
    assert "Completed" not in captured.out  # stdout carries only results
    # a bar redraws itself after "\r" on one line per pass (str.splitlines would split at "\r")
    lines = [line.rsplit("\r", 1)[-1] for line in captured.err.split("\n") if line.strip()]
    assert len(lines) == res.n_passes
    # one bar per pass, named as the result records them (the last depends on the verdict)
    assert [line.split()[0] for line in lines] == [p["name"] for p in res.passes]
    assert lines[0].startswith("mspca-stats")
    assert all("100% Completed" in line for line in lines)


def test_executor__repr_html_shows_the_dashboard_link_and_the_passes(model):
    with local_cluster(1) as cluster, Client(cluster, set_as_default=False) as client:
        ex = Executor(scheduler=client)
        ex.run("mspca-stats", pass_graph(orient(model.to_dask(CHUNKS)), stats=True))
        html = ex._repr_html_()
        assert client.dashboard_link in html and "mspca-stats" in html
        assert "1 pass(es) done" in html and "row_sum" in html
        ex._current = "mspca-pass-2"
        assert "running <code>mspca-pass-2</code>" in ex._repr_html_()
        assert "mspca-pass-2" in repr(ex)
    assert "no dashboard" in Executor(scheduler="threads")._repr_html_()


def test_blas_threads__one_per_task_with_enough_chunks_all_for_one_chunk():
    cores = os.cpu_count() or 1
    assert blas_threads(100) == 1
    assert blas_threads(1) == cores
    assert blas_threads(None) is None
    with dask.config.set({"mspca.blas-threads": None}):
        assert blas_threads(100) is None
    with dask.config.set({"mspca.blas-threads": 3}):
        assert blas_threads(1) == 3
