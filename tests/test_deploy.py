"""The deployment files under ``deploy/`` parse, agree with each other and run our real CLIs.

Nothing here needs Docker, Kubernetes or SLURM: manifests are parsed with PyYAML, every command
they run is parsed by the real parser of that command (``mspca``'s argparse parser, the
genomics pipeline's, and distributed's ``dask worker`` / ``dask scheduler`` click commands), and
dask-jobqueue builds the SLURM job script without submitting it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import dask.config
import pytest
import yaml
from dask.utils import parse_bytes, parse_timedelta

import mspca_dask.genomics as genomics
from mspca_dask import cli
from mspca_dask._execution import connect_timeout, worker_timeout
from mspca_dask.cli import fit as cli_fit
from mspca_dask.genomics.cli import _cmd_run

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
DOCKERFILE = DEPLOY / "docker" / "Dockerfile"
COMPOSE = DEPLOY / "compose" / "compose.yaml"
K8S = DEPLOY / "kubernetes"
SLURM = DEPLOY / "slurm"


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


def dockerfile_instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """``[(INSTRUCTION, arguments), ...]`` with comments dropped and continuations joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):  # a comment inside a continued instruction
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, f"{path} ends inside a continued instruction"
    return out


def key_values(text: str) -> dict[str, str]:
    """``K1=v1 K2="v 2"`` (the ENV and LABEL syntax) as a dict."""
    pairs = {}
    for token in shlex.split(text):
        key, sep, value = token.partition("=")
        assert sep, f"expected KEY=value, got {token!r}"
        pairs[key] = value
    return pairs


def dockerfile_labels() -> dict[str, str]:
    labels: dict[str, str] = {}
    for word, rest in dockerfile_instructions():
        if word == "LABEL":
            labels.update(key_values(rest))
    return labels


def dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for word, rest in dockerfile_instructions():
        if word == "ENV":
            env.update(key_values(rest))
    return env


def image_reference() -> str:
    """The one image every manifest runs: ``title:version`` from the Dockerfile's labels."""
    labels = dockerfile_labels()
    return (
        f"{labels['org.opencontainers.image.title']}:{labels['org.opencontainers.image.version']}"
    )


IMAGE = image_reference()


def load_all(path: Path) -> list[dict[str, Any]]:
    with open(path) as f:
        return [doc for doc in yaml.safe_load_all(f) if doc is not None]


def k8s_object(kind: str, name: str | None = None) -> dict[str, Any]:
    """The one object of ``kind`` (and ``name``) among the Kubernetes manifests."""
    found = [
        doc
        for path in sorted(K8S.glob("*.yaml"))
        for doc in load_all(path)
        if doc["kind"] == kind and (name is None or doc["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def cronjobs() -> dict[str, dict[str, Any]]:
    return {
        doc["metadata"]["name"]: doc
        for path in sorted(K8S.glob("*.yaml"))
        for doc in load_all(path)
        if doc["kind"] == "CronJob"
    }


def cronjob_running(module_or_program: str) -> dict[str, Any]:
    """The CronJob whose container command starts with ``mspca`` / runs ``-m MODULE``."""
    found = []
    for job in cronjobs().values():
        (container,) = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
        command = container["command"]
        if command[0] == module_or_program or command[1:3] == ["-m", module_or_program]:
            found.append(job)
    assert len(found) == 1, f"expected one CronJob running {module_or_program}, got {len(found)}"
    return found[0]


def pod_spec(job: Mapping[str, Any]) -> dict[str, Any]:
    return job["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def parse_mspca(command: list[str]) -> argparse.Namespace:
    """Parse an ``mspca`` command line with the real parser, options spelt in full.

    argparse also accepts unambiguous prefixes (``--comp``); a manifest should not rely on
    them, since a new option can make a prefix ambiguous.
    """
    assert command[0] == "mspca", command
    parser = cli.build_parser()
    args = parser.parse_args(command[1:])
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    known = set(subparsers.choices[args.command]._option_string_actions)
    for word in command[2:]:
        if word.startswith("-") and word != "-":
            assert word.split("=")[0] in known, f"{word} is not an option of mspca {args.command}"
    return args


def parse_dask_worker(args: list[str]) -> dict[str, Any]:
    """Parse ``dask worker`` arguments with distributed's own click command (nothing runs)."""
    from distributed.cli import dask_worker

    params = dask_worker.main.make_context("dask worker", list(args)).params
    # The command accepts unknown options (they go to --preload modules); with no preload
    # they are a misspelt option.
    assert params["preload_argv"] == (), f"unknown dask worker options {params['preload_argv']}"
    return params


def parse_dask_scheduler(args: list[str]) -> dict[str, Any]:
    from distributed.cli import dask_scheduler

    params = dask_scheduler.main.make_context("dask scheduler", list(args)).params
    assert params["preload_argv"] == (), f"unknown scheduler options {params['preload_argv']}"
    return params


def k8s_bytes(quantity: str) -> int:
    """A Kubernetes memory quantity (``7Gi``, ``500M``) in bytes."""
    return parse_bytes(quantity + "B" if quantity.endswith("i") else quantity)


def port_of(address: str) -> int:
    """The port of ``host:port``, ``:port`` or ``port`` (all valid ``--dashboard-address``)."""
    return int(str(address).rsplit(":", 1)[-1])


def scheduler_host_port(address: str) -> tuple[str, int]:
    match = re.fullmatch(r"tcp://([^:/]+):(\d+)", address)
    assert match, f"not a tcp://host:port address: {address!r}"
    return match[1], int(match[2])


@contextlib.contextmanager
def dask_env(env: Mapping[str, str]) -> Iterator[None]:
    """Apply ``DASK_*`` environment variables to ``dask.config`` the way Dask does at import."""
    with dask.config.set(flat(dask.config.collect_env(dict(env)))):
        yield


def flat(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mapping -> dotted keys, so ``dask.config.set`` only touches those leaves."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def fit_on_slurm() -> ModuleType:
    return load_module(SLURM / "fit_on_slurm.py", "fit_on_slurm")


# --------------------------------------------------------------------------------------
# Every file
# --------------------------------------------------------------------------------------


def test_deploy__every_yaml_file_parses_into_objects() -> None:
    paths = sorted(DEPLOY.rglob("*.yaml")) + sorted(DEPLOY.rglob("*.yml"))
    assert {p.relative_to(DEPLOY).as_posix() for p in paths} >= {
        "compose/compose.yaml",
        "kubernetes/daskcluster.yaml",
        "kubernetes/cronjob.yaml",
        "kubernetes/genomics-cronjob.yaml",
        "slurm/jobqueue.yaml",
    }
    for path in paths:
        docs = load_all(path)
        assert docs, f"{path} holds no document"
        assert all(isinstance(doc, dict) for doc in docs), path


def test_deploy__every_kubernetes_object_has_kind_version_and_name() -> None:
    for path in sorted(K8S.glob("*.yaml")):
        for doc in load_all(path):
            body = "data" if doc["kind"] == "ConfigMap" else "spec"
            assert {"apiVersion", "kind", "metadata", body} <= set(doc), path
            assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", doc["metadata"]["name"]), path


def test_deploy__every_folder_has_a_readme_and_the_overview_links_them() -> None:
    overview = (DEPLOY / "README.md").read_text()
    for folder in ("docker", "compose", "kubernetes", "slurm"):
        assert (DEPLOY / folder / "README.md").is_file(), folder
        assert f"{folder}/" in overview, f"deploy/README.md does not mention {folder}/"


def test_deploy__image_is_one_reference_everywhere() -> None:
    """Every container, service and job runs exactly the image the Dockerfile builds."""
    seen: dict[str, str] = {}

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "image":
                    seen[f"{where}.image"] = expand_compose(value)
                walk(value, f"{where}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}[{i}]")

    for path in sorted(K8S.glob("*.yaml")) + [COMPOSE]:
        for i, doc in enumerate(load_all(path)):
            walk(doc, f"{path.relative_to(DEPLOY)}#{i}")
    assert len(seen) >= 7, seen  # 2 DaskCluster + 2 CronJobs + compose anchor and services
    assert set(seen.values()) == {IMAGE}, {k: v for k, v in seen.items() if v != IMAGE}


# --------------------------------------------------------------------------------------
# Dockerfile
# --------------------------------------------------------------------------------------


def test_dockerfile__image_version_is_the_package_version() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    labels = dockerfile_labels()
    assert labels["org.opencontainers.image.title"] == project["name"]
    assert labels["org.opencontainers.image.version"] == project["version"]
    assert IMAGE == f"{project['name']}:{project['version']}"


def test_dockerfile__pins_blas_threads_to_one() -> None:
    env = dockerfile_env()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        assert env.get(var) == "1", var


def test_dockerfile__installs_the_project_from_the_build_context() -> None:
    instructions = dockerfile_instructions()
    copies = [shlex.split(rest) for word, rest in instructions if word == "COPY"]
    for args in copies:
        sources = [a for a in args[:-1] if not a.startswith("--")]
        for source in sources:  # the build context is the repository root
            assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
    copied = {s for args in copies for s in args[:-1]}
    assert {"pyproject.toml", "mspca_dask"} <= copied
    installs = [rest for word, rest in instructions if word == "RUN" and "pip install" in rest]
    assert len(installs) == 1
    install_args = shlex.split(installs[0].split("pip install", 1)[1].split("&&")[0])
    assert any(re.fullmatch(r"\.(\[[a-z,]+\])?", a) for a in install_args), install_args
    # the image checks its own entry points at build time
    checks = " ".join(rest for word, rest in instructions if word == "RUN")
    assert "mspca --version" in checks and "python -m pipelines.genomics --help" in checks
    assert dockerfile_env()["PYTHONUNBUFFERED"] == "1"
    user = [rest for word, rest in instructions if word == "USER"]
    assert user and user[-1] not in ("root", "0")


@pytest.mark.integration
def test_dockerfile__pipelines_module_runs_from_the_copied_files(tmp_path: Path) -> None:
    """Lay the files out as the image does and run the genomics command from elsewhere."""
    instructions = dockerfile_instructions()
    workdir = Path("/")
    target: Path | None = None
    for word, rest in instructions:
        if word == "WORKDIR":
            workdir = workdir / rest
        if word == "COPY" and "pipelines/genomics.py" in rest:
            *sources, dest = shlex.split(rest)
            target = workdir / dest
            image_root = tmp_path / "image"
            for source in sources:
                copied = image_root / target.relative_to("/") / Path(source).name
                copied.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(ROOT / source, copied)
    assert target is not None and target.name == "pipelines"
    assert dockerfile_env()["PYTHONPATH"] == str(target.parent)
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "image" / target.parent.relative_to("/")))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = subprocess.run(
        [sys.executable, "-m", "pipelines.genomics", "run", str(elsewhere / "job.toml")],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == genomics.EXIT_USAGE, run.stderr
    assert "no config file" in run.stderr


# --------------------------------------------------------------------------------------
# Kubernetes
# --------------------------------------------------------------------------------------


def test_daskcluster__is_an_operator_resource_running_our_image() -> None:
    cluster = k8s_object("DaskCluster")
    assert cluster["apiVersion"] == "kubernetes.dask.org/v1"
    for role in ("scheduler", "worker"):
        (container,) = cluster["spec"][role]["spec"]["containers"]
        assert container["name"] == role
        assert container["image"] == IMAGE
        assert container["args"][:2] == ["dask", role]


def test_daskcluster__workers_have_a_nanny_and_a_memory_limit_below_the_pod_limit() -> None:
    (worker,) = k8s_object("DaskCluster")["spec"]["worker"]["spec"]["containers"]
    assert "--nanny" in worker["args"] and "--memory-limit" in worker["args"]
    params = parse_dask_worker(worker["args"][2:])
    assert params["nanny"] is True
    assert params["name"] == "$(DASK_WORKER_NAME)"  # set by the operator
    # No scheduler argument: the operator passes DASK_SCHEDULER_ADDRESS in the environment.
    assert params["scheduler"] is None
    limit = parse_bytes(params["memory_limit"])
    assert limit < k8s_bytes(worker["resources"]["limits"]["memory"])
    assert params["nthreads"] <= int(worker["resources"]["limits"]["cpu"])
    assert port_of(params["dashboard_address"]) == worker["ports"][0]["containerPort"]


def test_daskcluster__scheduler_ports_match_its_service() -> None:
    spec = k8s_object("DaskCluster")["spec"]["scheduler"]
    (container,) = spec["spec"]["containers"]
    params = parse_dask_scheduler(container["args"][2:])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert int(params["port"]) == ports["tcp-comm"]
    assert port_of(params["dashboard_address"]) == ports["http-dashboard"]
    service = {p["name"]: p for p in spec["service"]["ports"]}
    assert set(service) == set(ports)
    assert service["tcp-comm"]["port"] == ports["tcp-comm"]
    name = k8s_object("DaskCluster")["metadata"]["name"]
    assert spec["service"]["selector"]["dask.org/cluster-name"] == name


def test_daskautoscaler__scales_the_daskcluster() -> None:
    autoscaler = k8s_object("DaskAutoscaler")
    assert autoscaler["apiVersion"] == "kubernetes.dask.org/v1"
    assert autoscaler["spec"]["cluster"] == k8s_object("DaskCluster")["metadata"]["name"]
    assert 1 <= autoscaler["spec"]["minimum"] <= autoscaler["spec"]["maximum"]


def assert_reaches_the_daskcluster(address: str) -> None:
    """``address`` is the DaskCluster's scheduler Service, as the operator names it."""
    cluster = k8s_object("DaskCluster")
    host, port = scheduler_host_port(address)
    assert host.split(".")[0] == f"{cluster['metadata']['name']}-scheduler"
    ports = {p["name"]: p["port"] for p in cluster["spec"]["scheduler"]["service"]["ports"]}
    assert port == ports["tcp-comm"]


def test_fit_cronjob__command_is_accepted_by_the_mspca_parser() -> None:
    job = cronjob_running("mspca")
    assert job["apiVersion"] == "batch/v1"
    (container,) = pod_spec(job)["containers"]
    args = parse_mspca(container["command"])
    assert args.command == "fit" and args.handler is cli_fit.run
    assert args.n_components == 10 and args.variable == "X"
    assert args.overwrite is True  # a nightly job replaces last night's result
    assert "://" in args.source and "://" in args.out
    assert_reaches_the_daskcluster(args.scheduler)


@pytest.mark.parametrize("program", ["mspca", "pipelines.genomics"])
def test_cronjobs__run_one_at_a_time_and_never_restart_in_place(program: str) -> None:
    job = cronjob_running(program)
    spec = job["spec"]
    assert spec["concurrencyPolicy"] == "Forbid"
    assert len(spec["schedule"].split()) == 5
    assert pod_spec(job)["restartPolicy"] == "Never"  # podFailurePolicy requires it


@pytest.mark.parametrize(
    ("program", "exit_codes"),
    [
        ("mspca", {cli.EXIT_USAGE, cli.EXIT_EXISTS}),
        ("pipelines.genomics", {genomics.EXIT_USAGE, genomics.EXIT_EXISTS, genomics.EXIT_LOCKED}),
    ],
)
def test_cronjobs__do_not_retry_the_exit_codes_a_retry_cannot_fix(
    program: str, exit_codes: set[int]
) -> None:
    job = cronjob_running(program)
    (container,) = pod_spec(job)["containers"]
    (rule,) = job["spec"]["jobTemplate"]["spec"]["podFailurePolicy"]["rules"]
    assert rule["action"] == "FailJob"
    assert rule["onExitCodes"]["containerName"] == container["name"]
    assert rule["onExitCodes"]["operator"] == "In"
    assert set(rule["onExitCodes"]["values"]) == exit_codes
    assert cli.EXIT_ERROR not in exit_codes  # a lost scheduler is worth a retry


@pytest.mark.parametrize("program", ["mspca", "pipelines.genomics"])
def test_cronjobs__timeouts_in_the_environment_reach_the_executor(program: str) -> None:
    (container,) = pod_spec(cronjob_running(program))["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    with dask_env(env):
        assert worker_timeout() == parse_timedelta(env["DASK_MSPCA__WORKER_TIMEOUT"])
        assert connect_timeout() == parse_timedelta(env["DASK_MSPCA__CONNECT_TIMEOUT"])
    assert worker_timeout() != parse_timedelta(env["DASK_MSPCA__WORKER_TIMEOUT"])


def test_genomics_cronjob__command_is_the_pipelines_module(tmp_path: Path) -> None:
    job = cronjob_running("pipelines.genomics")
    (container,) = pod_spec(job)["containers"]
    command = container["command"]
    assert command[:3] == ["python", "-m", "pipelines.genomics"]
    pipelines_module = load_module(ROOT / "pipelines" / "genomics.py", "pipelines_genomics")
    assert pipelines_module.main is genomics.main  # the module only forwards to the package
    args = genomics.build_parser(prog="python -m pipelines.genomics").parse_args(command[3:])
    assert args.genomics_command == "run"
    assert args.genomics_handler is _cmd_run
    assert args.config == "/config/job.toml"


def test_genomics_cronjob__config_comes_from_the_configmap_and_validates(tmp_path: Path) -> None:
    job = cronjob_running("pipelines.genomics")
    spec = pod_spec(job)
    (container,) = spec["containers"]
    config_path = Path(container["command"][-1])
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    mount = mounts[str(config_path.parent)]
    assert mount["readOnly"] is True
    configmap_name = volumes[mount["name"]]["configMap"]["name"]
    configmap = k8s_object("ConfigMap", configmap_name)
    assert config_path.name in configmap["data"]

    written = tmp_path / "config" / config_path.name
    written.parent.mkdir()
    written.write_text(configmap["data"][config_path.name])
    cfg = genomics.load_config(written)  # the pipeline's own validation

    # The result is committed by a rename: it must be on the writable volume, not in /config.
    data_mounts = [p for p, m in mounts.items() if not m.get("readOnly")]
    (data_mount,) = data_mounts
    claim = volumes[mounts[data_mount]["name"]]["persistentVolumeClaim"]["claimName"]
    assert k8s_object("PersistentVolumeClaim", claim)["spec"]["accessModes"]
    assert cfg.output_dir.is_relative_to(data_mount)
    assert cfg.sample_metadata is not None and cfg.sample_metadata.is_relative_to(data_mount)
    # The Dask workers read the cohort, so it is in an object store they reach.
    assert "://" in cfg.store
    assert cfg.reference_mode == "metadata"
    assert_reaches_the_daskcluster(cfg.scheduler)
    # The pod runs as the image's user; the volume must be writable by it.
    assert spec["securityContext"]["fsGroup"] == 1000


# --------------------------------------------------------------------------------------
# Compose
# --------------------------------------------------------------------------------------


def expand_compose(value: Any) -> Any:
    """Expand ``${VAR:-default}`` as Compose does, with no variable set (the defaults)."""
    if not isinstance(value, str):
        return value

    def default(match: re.Match[str]) -> str:
        assert match[2] is not None, f"{match[0]} has no default; Compose would need it set"
        return match[2]

    return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", default, value)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    (doc,) = load_all(COMPOSE)
    return doc


def command_of(service: Mapping[str, Any]) -> list[str]:
    command = service["command"]
    command = shlex.split(command) if isinstance(command, str) else command
    return [str(expand_compose(c)) for c in command]


def test_compose__services_build_and_run_the_one_image(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {"scheduler", "worker", "fit"} <= set(services)
    for name, service in services.items():
        assert expand_compose(service["image"]) == IMAGE, name
        build = service["build"]
        context = (COMPOSE.parent / build["context"]).resolve()
        assert context == ROOT, name
        assert (context / build["dockerfile"]).resolve() == DOCKERFILE.resolve(), name


def test_compose__workers_have_a_nanny_and_reach_the_scheduler(compose: dict[str, Any]) -> None:
    services = compose["services"]
    scheduler = parse_dask_scheduler(command_of(services["scheduler"])[2:])
    published = {int(p.split(":")[1]) for p in services["scheduler"]["ports"]}
    assert {int(scheduler["port"]), port_of(scheduler["dashboard_address"])} == published

    worker = services["worker"]
    command = command_of(worker)
    assert command[:2] == ["dask", "worker"]
    params = parse_dask_worker(command[2:])
    assert params["nanny"] is True
    assert scheduler_host_port(params["scheduler"]) == ("scheduler", int(scheduler["port"]))
    limit = worker["deploy"]["resources"]["limits"]["memory"]
    assert parse_bytes(params["memory_limit"]) < parse_bytes(limit)
    assert worker["deploy"]["replicas"] >= 2
    assert worker["depends_on"]["scheduler"]["condition"] == "service_healthy"


def test_compose__fit_job_is_accepted_by_the_mspca_parser(compose: dict[str, Any]) -> None:
    services = compose["services"]
    args = parse_mspca(command_of(services["fit"]))
    assert args.command == "fit" and args.handler is cli_fit.run
    assert args.n_components == 10 and args.overwrite is True
    host, port = scheduler_host_port(args.scheduler)
    assert host in services
    assert port == int(parse_dask_scheduler(command_of(services[host])[2:])["port"])
    assert args.out.startswith("/data/")  # on the shared volume
    assert "mspca-data:/data" in services["fit"]["volumes"]

    # By default it fits the store that the demo-data service writes.
    demo = parse_mspca(command_of(services["demo-data"]))
    assert demo.command == "demo" and demo.no_cluster is True
    assert args.source == str(demo.dir / "data.zarr")
    assert args.variable == "X"
    assert services["fit"]["depends_on"]["demo-data"]["condition"] == (
        "service_completed_successfully"
    )


# --------------------------------------------------------------------------------------
# SLURM
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def job_script(fit_on_slurm: ModuleType) -> str:
    config = fit_on_slurm.read_config(SLURM / "jobqueue.yaml")
    with fit_on_slurm.slurm_cluster(config) as cluster:
        assert cluster.workers == {}  # built, nothing submitted
        return str(cluster.job_script())


def test_jobqueue__job_script_has_the_configured_sbatch_lines(job_script: str) -> None:
    config = yaml.safe_load((SLURM / "jobqueue.yaml").read_text())["jobqueue"]["slurm"]
    lines = job_script.splitlines()
    sbatch = {line for line in lines if line.startswith("#SBATCH")}
    assert {
        f"#SBATCH -J {config['name']}",
        f"#SBATCH --cpus-per-task={config['cores']}",
        f"#SBATCH -t {config['walltime']}",
        "#SBATCH --output=mspca-worker-%j.log",
    } <= sbatch
    (mem,) = [line for line in sbatch if line.startswith("#SBATCH --mem=")]
    assert parse_bytes(mem.split("=")[1] + "iB") == parse_bytes(config["memory"])
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        assert f"export {var}=1" in lines


def test_jobqueue__job_script_starts_nanny_workers_that_retire_before_the_walltime(
    job_script: str,
) -> None:
    config = yaml.safe_load((SLURM / "jobqueue.yaml").read_text())["jobqueue"]["slurm"]
    (line,) = [line for line in job_script.splitlines() if "distributed.cli.dask_worker" in line]
    words = shlex.split(line, posix=False)  # keep ${TMPDIR:-/tmp} for the shell
    assert words[1:3] == ["-m", "distributed.cli.dask_worker"]
    params = parse_dask_worker(words[3:])
    assert params["nanny"] is True
    n_workers = int(params["n_workers"])  # an option that also takes -1 or "auto"
    assert n_workers == config["processes"]
    assert params["nthreads"] * n_workers == config["cores"]
    assert parse_bytes(params["memory_limit"]) * n_workers == pytest.approx(
        parse_bytes(config["memory"]), rel=0.01
    )
    assert params["death_timeout"] == str(config["death-timeout"])
    assert params["local_directory"] == config["local-directory"]
    hours, minutes, seconds = (int(v) for v in config["walltime"].split(":"))
    walltime = 3600 * hours + 60 * minutes + seconds
    lifetime = parse_timedelta(params["lifetime"]) + parse_timedelta(params["lifetime_stagger"])
    assert lifetime < walltime


def test_fit_on_slurm__parses_its_arguments_and_builds_an_mspca_fit(
    fit_on_slurm: ModuleType,
) -> None:
    parser = fit_on_slurm.build_parser()
    args = parser.parse_args(
        ["--jobs", "4", "--", "data.zarr", "--variable", "X", "-k", "6", "--out", "r.zarr"]
    )
    assert args.jobs == 4 and args.worker_timeout == "30min"
    assert Path(args.config) == SLURM / "jobqueue.yaml"
    argv = fit_on_slurm.fit_argv(args.fit_args, "tcp://10.0.0.1:8786")
    assert argv[:2] == ["fit", "data.zarr"]
    parsed = cli.build_parser().parse_args(argv)
    assert (parsed.command, parsed.source, parsed.n_components) == ("fit", "data.zarr", 6)
    assert (parsed.out, parsed.scheduler) == ("r.zarr", "tcp://10.0.0.1:8786")


def test_fit_on_slurm__refuses_a_scheduler_of_its_own(fit_on_slurm: ModuleType) -> None:
    with pytest.raises(SystemExit, match="do not pass --scheduler"):
        fit_on_slurm.fit_argv(["--", "d.zarr", "--scheduler", "tcp://x:1"], "tcp://y:2")


def test_fit_on_slurm__main_needs_fit_arguments(
    fit_on_slurm: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit, match="^2$") as exc:
        fit_on_slurm.main(["--jobs", "2", "--"])
    assert exc.value.code == 2
    assert "give the arguments of `mspca fit` after --" in capsys.readouterr().err


def test_fit_on_slurm__read_config_names_a_missing_section(
    fit_on_slurm: ModuleType, tmp_path: Path
) -> None:
    path = tmp_path / "jobqueue.yaml"
    path.write_text("jobqueue:\n  pbs:\n    cores: 4\n")
    with pytest.raises(SystemExit, match="has no 'jobqueue: slurm:' section"):
        fit_on_slurm.read_config(path)


def test_fit_on_slurm__config_sets_only_the_leaves_it_names(fit_on_slurm: ModuleType) -> None:
    config = fit_on_slurm.read_config(SLURM / "jobqueue.yaml")
    flat_config = fit_on_slurm.flatten(config)
    assert flat_config["jobqueue.slurm.cores"] == 8
    shebang = dask.config.get("jobqueue.slurm.shebang")  # a default the file leaves out
    with dask.config.set(flat_config):
        assert dask.config.get("jobqueue.slurm.shebang") == shebang
        assert dask.config.get("jobqueue.slurm.cores") == 8
    assert dask.config.get("jobqueue.slurm.cores") != 8


def test_fit_sbatch__runs_fit_on_slurm_with_arguments_mspca_accepts(
    fit_on_slurm: ModuleType,
) -> None:
    text = (SLURM / "fit.sbatch").read_text()
    assert text.startswith("#!/bin/bash\n")
    directives = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --job-name=mspca-fit" in directives
    assert any(line.startswith("#SBATCH --time=") for line in directives)
    assert "export OMP_NUM_THREADS=1" in text
    joined = text.replace("\\\n", " ")
    (line,) = [
        line
        for line in joined.splitlines()
        if line.startswith("python ") and "fit_on_slurm" in line
    ]
    values = {'"$SOURCE"': "in.zarr", '"$RESULT"': "out.zarr", '"$JOBS"': "4"}
    for variable, value in values.items():
        line = line.replace(variable, value)
    words = shlex.split(line)
    assert words[:2] == ["python", "deploy/slurm/fit_on_slurm.py"]
    assert (ROOT / words[1]).is_file()  # sbatch is run from the repository root
    args = fit_on_slurm.build_parser().parse_args(words[2:])
    assert args.jobs == 4
    parsed = parse_mspca(["mspca", *fit_on_slurm.fit_argv(args.fit_args, "tcp://h:8786")])
    assert (parsed.command, parsed.source, parsed.out) == ("fit", "in.zarr", "out.zarr")
    assert parsed.scheduler == "tcp://h:8786"
