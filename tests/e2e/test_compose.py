"""docker-compose.yaml checked without a Docker engine (none runs on these machines): its structure,
pinned images, health checks, landing and lake on the S3 server (no shared data volume), the DAG
configuration, no secrets, the monitoring (Prometheus scraping the stream and Airflow, Grafana's
dashboard naming metrics that exist); and a real compose validator when one is installed (`docker
compose` or `docker-compose`)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.helpers.paths import ROOT

COMPOSE = ROOT / "docker-compose.yaml"
ENV_EXAMPLE = ROOT / ".env.example"
DOCKERFILE = ROOT / "docker" / "Dockerfile"

AIRFLOW_SERVICES = [
    "airflow-init",
    "airflow-api-server",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
]
SPARK_SERVICES = ["spark-master", "spark-worker"]
ONE_SHOT = {"airflow-init", "kafka-init"}
KAFKA_IMAGE = "apache/kafka:4.1.1"
MASTER_URL = "spark://spark-master:7077"
STORE = "object-store"
STORE_ENDPOINT = "http://object-store:9000"
LAKE, LANDING = "s3://market-spread/lake", "s3://market-spread/landing"
VAR = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])[^}]*)?\}")
SECRET_NAME = re.compile(r"PASSWORD|SECRET|FERNET|TOKEN|PRIVATE|_KEY$")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


def _env(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def _mounts(service: dict) -> dict[str, str]:
    """target -> source of the service's volumes (short syntax)."""
    out = {}
    for item in service.get("volumes") or []:
        source, target = item.split(":")[:2] if isinstance(item, str) else (item["source"], item["target"])
        out[target] = source
    return out


def _project_version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def _pinned(pyproject_name: str) -> str:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (spec,) = [d for d in deps if re.match(rf"{re.escape(pyproject_name)}(\[.*\])?==", d)]
    return spec.split("==", 1)[1]


def _dockerfile_images() -> list[str]:
    """Every image the Dockerfile builds from (ARG defaults behind FROM ${...})."""
    text = DOCKERFILE.read_text()
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", text, re.M))
    images = []
    for ref in re.findall(r"^FROM (\S+)", text, re.M):
        match = re.fullmatch(r"\$\{(\w+)\}", ref)
        images.append(args[match.group(1)] if match else ref)
    return images


def _is_pinned(image: str) -> bool:
    name, _, tag = image.rpartition(":")
    return bool(name) and "/" not in tag and tag != "latest" and re.match(r"^v?\d+(\.\d+)+", tag) is not None


def test_every_service_is_there(services):
    for name in ["postgres", *AIRFLOW_SERVICES, *SPARK_SERVICES, STORE]:
        assert name in services, f"missing service {name}"
    commands = {name: services[name].get("command") for name in AIRFLOW_SERVICES[1:]}
    assert commands == {
        "airflow-api-server": "api-server",
        "airflow-scheduler": "scheduler",
        "airflow-dag-processor": "dag-processor",
        "airflow-triggerer": "triggerer",
    }
    assert services["airflow-scheduler"]["environment"]["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"


def test_images_are_pinned_to_exact_versions(services):
    for name, service in services.items():
        image = service.get("image")
        assert image, f"{name}: no image name"
        assert _is_pinned(image), f"{name}: image {image!r} is not pinned to an exact version"
        if "build" in service:
            # Our own image: the project's version, built from docker/Dockerfile at the repo root.
            assert image == f"market-spread:{_project_version()}"
            assert service["build"] == {"context": ".", "dockerfile": "docker/Dockerfile"}
    for image in _dockerfile_images():
        assert _is_pinned(image), f"Dockerfile: base image {image!r} is not pinned"
    # The same Airflow as the package pins, on the package's Python.
    assert f"apache/airflow:{_pinned('apache-airflow')}-python3.11" in _dockerfile_images()
    # Spark services run the image's own pip-installed Spark: the version pyproject pins.
    for name in SPARK_SERVICES:
        assert services[name]["build"] == services["airflow-scheduler"]["build"]
        assert services[name]["command"][0] == "/opt/spark/bin/spark-class"


def test_dockerfile_fetches_the_same_jars_as_make_setup():
    makefile = (ROOT / "Makefile").read_text()
    groups = re.search(r"^JAR_GROUPS := (\S+)$", makefile, re.M).group(1)
    text = DOCKERFILE.read_text()
    assert f"-DincludeGroupIds={groups}" in text
    assert "COPY jobs/maven/pom.xml" in text
    assert "MARKET_SPREAD_JARS=/opt/market-spread/.cache/jars" in text
    ignore = (ROOT / "docker" / "Dockerfile.dockerignore").read_text().split()
    assert ".env" in ignore and ".venv" in ignore, "secrets and local environments stay out of the build context"


def test_dockerfile_copies_named_project_paths_that_exist():
    for line in re.findall(r"^COPY (.+)$", DOCKERFILE.read_text(), re.M):
        words = [w for w in line.split() if not w.startswith("--")]
        if "--from=" in line:
            continue
        for source in words[:-1]:
            assert source not in (".", "./", "*"), "copy named paths only: a local .env must never reach the image"
            assert (ROOT / source).exists(), f"Dockerfile copies {source}, which is not in the repository"


def test_long_running_services_have_health_checks_and_start_in_order(services):
    for name, service in services.items():
        if name in ONE_SHOT:
            assert "healthcheck" not in service and "restart" not in service
            continue
        check = service.get("healthcheck")
        assert check and check.get("test"), f"{name}: no health check"
        assert check["test"][0] in ("CMD", "CMD-SHELL")
    for name in AIRFLOW_SERVICES[1:]:
        depends = services[name]["depends_on"]
        assert depends["postgres"]["condition"] == "service_healthy"
        assert depends["airflow-init"]["condition"] == "service_completed_successfully"
    assert services["spark-worker"]["depends_on"]["spark-master"]["condition"] == "service_healthy"
    assert services["airflow-scheduler"]["depends_on"]["spark-master"]["condition"] == "service_healthy"
    # Nothing that reads or writes the lake starts before the S3 server answers with its bucket.
    for name in [*AIRFLOW_SERVICES[1:], "spark-worker"]:
        assert services[name]["depends_on"][STORE]["condition"] == "service_healthy", name
    assert "head_bucket(Bucket='market-spread')" in services[STORE]["healthcheck"]["test"][-1]


def test_workers_scale_freely(services):
    worker = services["spark-worker"]
    assert "container_name" not in worker and "ports" not in worker, "`--scale spark-worker=N` needs neither"
    assert worker["command"][2] == MASTER_URL


def test_an_s3_server_holds_landing_and_lake(compose, services):
    """Issue 41: no disk shared between containers for the data: the object-store service runs the
    product's S3 server on the container's interface, with a volume of its own."""
    store = services[STORE]
    assert store["build"] == services["airflow-scheduler"]["build"], "the product image: its JAR and its command"
    command = store["command"]
    assert command[:2] == ["market-spread", "object-store"]
    option = {command[i]: command[i + 1] for i in range(2, len(command) - 1, 2)}
    assert option["--host"] == "0.0.0.0", "reachable by the other containers, not only its own loopback"
    assert f"http://{STORE}:{option['--port']}" == STORE_ENDPOINT and option["--bucket"] == "market-spread"
    assert "ports" not in store, "the store stays inside the compose network"
    volume = _mounts(store)[option["--data"]]
    assert volume in (compose.get("volumes") or {}), "a named volume, not a host folder"
    env = _env(store)
    assert VAR.fullmatch(env["AWS_SECRET_ACCESS_KEY"]) and VAR.fullmatch(env["AWS_ACCESS_KEY_ID"])
    # Its data volume is its own, and no other service mounts a data volume for landing or lake.
    users: dict[str, set[str]] = {}
    for name, service in services.items():
        for target, source in _mounts(service).items():
            users.setdefault(source, set()).add(name)
            assert not target.startswith(("/data/lake", "/data/landing")) and target != "/data", f"{name}: {target}"
    assert users[volume] == {STORE}
    shared = {source for source, names in users.items() if len(names) > 1}
    assert shared <= {"quality-docs", "airflow-logs", "spark-auth"}, shared


def test_every_spark_and_airflow_service_reaches_the_s3_server(services):
    store_env = _env(services[STORE])
    for name in [*AIRFLOW_SERVICES, *SPARK_SERVICES]:
        env = _env(services[name])
        assert env["AWS_ENDPOINT_URL"] == STORE_ENDPOINT, name
        # The same keys the store accepts, from .env.
        assert env["AWS_ACCESS_KEY_ID"] == store_env["AWS_ACCESS_KEY_ID"], name
        assert env["AWS_SECRET_ACCESS_KEY"] == store_env["AWS_SECRET_ACCESS_KEY"], name
        assert (env["MARKET_SPREAD_LAKE"], env["MARKET_SPREAD_LANDING"]) == (LAKE, LANDING), name
    # The Data Docs stay on a volume: the Airflow UI's plugin (api-server) serves what validate
    # (in the scheduler) writes.
    for name in ("airflow-api-server", "airflow-scheduler"):
        docs = _env(services[name])["MARKET_SPREAD_DOCS"]
        assert _mounts(services[name])[docs] == "quality-docs", name


def test_dags_point_at_the_cluster_through_configuration(services, monkeypatch):
    from market_spread.orchestration.settings import resolve_settings
    from market_spread.orchestration.supervisor import stream_argv
    from market_spread.runtime.env import ENV_PREFIX

    for name in AIRFLOW_SERVICES:
        env = _env(services[name])
        assert env["MARKET_SPREAD_MASTER"] == MASTER_URL
        for key in ("MARKET_SPREAD_LAKE", "MARKET_SPREAD_LANDING"):
            assert env[key].startswith("s3://market-spread/"), f"{name}: {key} is not on the S3 server"
        assert env["AIRFLOW__CORE__DAGS_FOLDER"] == "/opt/market-spread/dags"
    # The names are the ones the DAGs read: resolve the settings as a task would.
    env = _env(services["airflow-scheduler"])
    for key in list(os.environ):
        if key.startswith(ENV_PREFIX):
            monkeypatch.delenv(key)
    for key, value in env.items():
        if key.startswith(ENV_PREFIX) and "${" not in value:
            monkeypatch.setenv(key, value)
    settings = resolve_settings(lambda _name: None)
    assert settings.master == MASTER_URL
    assert settings.lake.uri("s3") == LAKE and settings.landing.uri("s3") == LANDING
    assert settings.docs == Path("/data/quality")
    assert "--master" in stream_argv(settings)
    # The master the DAGs name is the one the spark-master service runs.
    master = services["spark-master"]["command"]
    assert master[master.index("--host") + 1] == "spark-master" and master[master.index("--port") + 1] == "7077"


def test_no_secrets_in_the_compose_file(services):
    for name, service in services.items():
        for key, value in _env(service).items():
            if key.endswith(("_FILE", "_CMD")) and "/run/secrets/" in value:
                continue  # a path to a secret file, not a secret
            if SECRET_NAME.search(key) and key != "AIRFLOW__CORE__AUTH_MANAGER":
                assert VAR.fullmatch(value), f"{name}: {key} must come from .env as ${{VAR}}, not be written here"
            if "://" in value and "@" in value:
                password = re.search(r"://[^:/@]+:(.*)@", value).group(1)
                assert VAR.fullmatch(password), f"{name}: {key} holds a literal password"
    # Required secrets fail loudly when .env lacks them, instead of running with an empty password:
    # interpolated ones through ${VAR:?...}, file secrets through airflow-init's check of every file.
    text = COMPOSE.read_text()
    for var in ("AIRFLOW_JWT_SECRET", "AIRFLOW_API_SECRET_KEY", "OBJECT_STORE_SECRET_ACCESS_KEY"):
        uses = [m for m in VAR.finditer(text) if m.group(1) == var]
        assert uses and all(m.group(2) == ":?" for m in uses), f"{var} must be required (${{{var}:?…}})"
    assert '[ -s "$$secret" ] ||' in services["airflow-init"]["command"][1]


FILE_SECRETS = ("postgres_password", "airflow_fernet_key", "airflow_admin_password", "grafana_admin_password")


def test_passwords_reach_containers_as_files_not_environment(compose, services):
    declared = compose.get("secrets") or {}
    assert set(declared) == set(FILE_SECRETS)
    for name, spec in declared.items():
        # A file each (any Compose reads those), in a folder the user makes once and git ignores.
        assert spec.get("file", "").endswith(f"secrets}}/{name}"), (name, spec)
    for name, service in services.items():
        for key, value in _env(service).items():
            for var in ("POSTGRES_PASSWORD", "AIRFLOW_FERNET_KEY", "AIRFLOW_ADMIN_PASSWORD"):
                assert f"${{{var}" not in value, f"{name}: {key} puts {var} into the container's environment"
            assert "postgresql" not in value or "/run/secrets/postgres_password" in value, f"{name}: {key}"
    assert _env(services["postgres"])["POSTGRES_PASSWORD_FILE"] == "/run/secrets/postgres_password"
    assert "postgres_password" in services["postgres"]["secrets"]
    for name in AIRFLOW_SERVICES:
        env, secrets = _env(services[name]), services[name].get("secrets") or []
        assert "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" not in env and "AIRFLOW__CORE__FERNET_KEY" not in env, name
        assert "/run/secrets/postgres_password" in env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_CMD"], name
        assert env["AIRFLOW__CORE__FERNET_KEY_CMD"] == "cat /run/secrets/airflow_fernet_key", name
        assert {"postgres_password", "airflow_fernet_key"} <= set(secrets), name
    init = _env(services["airflow-init"])
    assert "_AIRFLOW_WWW_USER_PASSWORD" not in init
    assert init["_AIRFLOW_WWW_USER_PASSWORD_CMD"] == "cat /run/secrets/airflow_admin_password"


def test_spark_rpc_is_authenticated_with_a_secret_generated_once(compose, services):
    assert "spark-auth" in (compose.get("volumes") or {})
    init = services["airflow-init"]["command"][1]
    # Generated only when absent (a restart keeps it, so running executors stay valid), never readable by others.
    assert "if [ ! -s /opt/spark-auth/spark-defaults.conf ]; then" in init and "umask 077" in init
    assert "spark.authenticate true" in init and "spark.authenticate.secret" in init and "secrets.token_hex" in init
    assert "chmod 0600 /opt/spark-auth/spark-defaults.conf" in init
    assert _mounts(services["airflow-init"])["/opt/spark-auth"] == "spark-auth"
    # Master, workers and the driver (in the scheduler) read it as their spark-defaults.conf.
    for name in [*SPARK_SERVICES, "airflow-scheduler"]:
        assert _env(services[name])["SPARK_CONF_DIR"] == "/opt/spark-auth", name
        mounts = {item.split(":")[1]: item for item in services[name]["volumes"]}
        assert mounts["/opt/spark-auth"] == "spark-auth:/opt/spark-auth:ro", name
    for name in SPARK_SERVICES:
        assert services[name]["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully", name
    assert "spark.authenticate.secret" not in yaml.safe_dump({k: v for k, v in services.items() if k != "airflow-init"})


def test_no_recursive_chown_of_the_lake_on_every_start(services):
    init = services["airflow-init"]["command"][1]
    for line in init.splitlines():
        if "chown -R" in line:
            # Only where a folder's own owner is wrong: once on a fresh volume, not on every start.
            assert line.strip().startswith('if [ "$$(stat -c %u:%g') and '!= "50000:0" ]; then' in line, line
    assert "airflow pools set lake_jobs 1" in init


def _env_example() -> dict[str, str]:
    pairs = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            pairs[key] = value
    return pairs


def test_env_example_covers_every_variable_with_placeholders_only():
    used = {m.group(1) for m in VAR.finditer(COMPOSE.read_text())}
    example = _env_example()
    assert used - set(example) == set(), f"not in .env.example: {sorted(used - set(example))}"
    assert set(example) - used == set(), f"unused in docker-compose.yaml: {sorted(set(example) - used)}"
    for key, value in example.items():
        if SECRET_NAME.search(key):
            assert value.startswith("change-me"), f".env.example: {key} must be a placeholder"


def _compose_cli() -> list[str] | None:
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def test_a_real_compose_validator_accepts_the_file(tmp_path):
    cli = _compose_cli()
    if cli is None:
        pytest.skip("no compose validator installed (`docker compose` plugin or `docker-compose`)")
    env_file = tmp_path / ".env"
    shutil.copyfile(ENV_EXAMPLE, env_file)
    # No engine needed: `config` only parses, interpolates and checks against the compose schema.
    base = cli + ["--project-directory", str(ROOT), "-f", str(COMPOSE), "--env-file", str(env_file), "config"]
    clean_env = {k: v for k, v in os.environ.items() if k not in _env_example()}
    done = subprocess.run(base + ["-q"], capture_output=True, text=True, env=clean_env, timeout=120)
    assert done.returncode == 0, done.stderr
    rendered = subprocess.run(base, capture_output=True, text=True, env=clean_env, timeout=120)
    assert rendered.returncode == 0, rendered.stderr
    worker = yaml.safe_load(rendered.stdout)["services"]["spark-worker"]
    assert worker["command"][3:7] == ["--cores", "2", "--memory", "2g"]
    # The secrets are files the user makes once; compose names where it reads them.
    declared = yaml.safe_load(rendered.stdout)["secrets"]
    assert all(declared[name]["file"].endswith(f"/secrets/{name}") for name in FILE_SECRETS), declared


def test_a_kafka_service_and_the_same_source_switch_as_make_run(services, monkeypatch):
    from market_spread.orchestration.settings import resolve_settings
    from market_spread.orchestration.supervisor import source_args, stream_argv
    from market_spread.runtime.env import ENV_PREFIX

    kafka = services["kafka"]
    assert kafka["image"] == KAFKA_IMAGE and services["kafka-init"]["image"] == KAFKA_IMAGE
    env = _env(kafka)
    assert (
        env["KAFKA_PROCESS_ROLES"] == "broker,controller"
        and env["KAFKA_ADVERTISED_LISTENERS"] == "PLAINTEXT://kafka:9092"
    )
    assert int(env["KAFKA_MESSAGE_MAX_BYTES"]) >= 4 * 1024 * 1024, "2 MB records must pass"
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    assert "/var/lib/kafka/data" in _mounts(kafka) and _mounts(kafka)["/var/lib/kafka/data"] == "kafka-data"
    assert "ports" not in kafka, "the broker stays inside the compose network"
    init = services["kafka-init"]
    assert init["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert all(topic in init["command"][-1] for topic in ("quotes orders", "--partitions 4", "--if-not-exists"))
    for name in AIRFLOW_SERVICES:
        airflow_env = _env(services[name])
        assert airflow_env["MARKET_SPREAD_SOURCE"] == "${MARKET_SPREAD_SOURCE:-files}"
        assert airflow_env["MARKET_SPREAD_BOOTSTRAP_SERVERS"] == "kafka:9092"
    # With the switch on, the DAGs' commands read and write the kafka service's topics.
    for key in list(os.environ):
        if key.startswith(ENV_PREFIX):
            monkeypatch.delenv(key)
    monkeypatch.setenv("MARKET_SPREAD_SOURCE", "kafka")
    monkeypatch.setenv(
        "MARKET_SPREAD_BOOTSTRAP_SERVERS", _env(services["airflow-scheduler"])["MARKET_SPREAD_BOOTSTRAP_SERVERS"]
    )
    settings = resolve_settings(lambda _name: None)
    argv = stream_argv(settings)
    assert argv[argv.index("--source") + 1] == "kafka" and argv[argv.index("--bootstrap-servers") + 1] == "kafka:9092"
    assert "--landing" not in argv
    assert source_args(settings, producer=True) == ["--kafka", "kafka:9092"]


def test_dockerfile_fetches_the_kafka_connector_like_make_setup():
    makefile = (ROOT / "Makefile").read_text()
    ids = re.search(r"^KAFKA_JAR_IDS := (\S+)$", makefile, re.M).group(1)
    text = DOCKERFILE.read_text()
    assert "COPY jobs/maven/kafka-connector-pom.xml" in text and f"-DincludeArtifactIds={ids}" in text
    assert "MARKET_SPREAD_KAFKA_JARS=/opt/market-spread/.cache/kafka-jars" in text


def test_dockerfile_fetches_the_s3_pieces_like_make_setup():
    """Spark's S3A connector (every container's Spark reads s3a:// lakes) and the S3 server's JAR."""
    makefile = (ROOT / "Makefile").read_text()
    groups = re.search(r"^S3_JAR_GROUPS := (\S+)$", makefile, re.M).group(1)
    text = DOCKERFILE.read_text()
    assert "COPY jobs/maven/s3-pom.xml" in text and f"-DincludeGroupIds={groups}" in text
    assert "COPY jobs/maven/s3proxy-pom.xml" in text and "s3proxy-*-jar-with-dependencies.jar" in text
    assert "MARKET_SPREAD_S3_JARS=/opt/market-spread/.cache/s3-jars" in text
    assert "MARKET_SPREAD_S3PROXY_JARS=/opt/market-spread/.cache/s3proxy" in text


def test_dockerfile_builds_the_log_store_like_make_setup():
    """The Delta log store every session registers (issue 64), compiled from the same source against
    the Hadoop client API of the Spark pyspark installs."""
    import pyspark

    makefile, text = (ROOT / "Makefile").read_text(), DOCKERFILE.read_text()
    source = re.search(r"^LOGSTORE_SRC := (\S+)$", makefile, re.M).group(1)
    assert f"COPY {source} " in text and "market-spread-logstore.jar" in text
    version = re.search(r"^ARG HADOOP_CLIENT_API=(\S+)$", text, re.M).group(1)
    assert (Path(pyspark.__file__).parent / "jars" / f"hadoop-client-api-{version}.jar").is_file()
    assert "MARKET_SPREAD_LOGSTORE_JARS=/opt/market-spread/.cache/logstore" in text


def _config(service: dict, target: str) -> Path:
    """The repository file a service mounts at `target` (read-only)."""
    mounts = {item.split(":")[1]: item for item in service["volumes"]}
    source, _, mode = mounts[target].split(":")
    assert mode == "ro" and source.startswith("./"), mounts[target]
    path = ROOT / source
    assert path.exists(), f"{source} is mounted but not in the repository"
    return path


def test_prometheus_scrapes_the_stream_and_airflow(services):
    from market_spread.runtime.settings import setting

    prometheus, exporter = services["prometheus"], services["statsd-exporter"]
    config = yaml.safe_load(_config(prometheus, "/etc/prometheus/prometheus.yml").read_text())
    targets = {job["job_name"]: job["static_configs"][0]["targets"] for job in config["scrape_configs"]}
    # The stream runs in the scheduler (LocalExecutor), on its default metrics port, listening on the
    # container's interface; the exporter's web port is the one scraped.
    assert targets["market-spread-stream"] == [f"airflow-scheduler:{setting('MARKET_SPREAD_METRICS_PORT').default}"]
    scheduler = _env(services["airflow-scheduler"])
    assert scheduler["MARKET_SPREAD_METRICS_HOST"] == "0.0.0.0" and "MARKET_SPREAD_METRICS_PORT" not in scheduler
    flags = dict(arg.lstrip("-").split("=", 1) for arg in exporter["command"])
    assert targets["airflow"] == [f"statsd-exporter{flags['web.listen-address']}"]
    assert flags["statsd.listen-tcp"] == "" and flags["statsd.mapping-config"] == "/etc/statsd/mapping.yml"
    _config(exporter, "/etc/statsd/mapping.yml")
    # Every Airflow component sends its StatsD metrics to the exporter, through the connected client.
    for name in AIRFLOW_SERVICES:
        env = _env(services[name])
        assert env["AIRFLOW__METRICS__STATSD_ON"] == "True", name
        assert (
            f"{env['AIRFLOW__METRICS__STATSD_HOST']}:{env['AIRFLOW__METRICS__STATSD_PORT']}"
            == f"statsd-exporter{flags['statsd.listen-udp']}"
        ), name
        assert env["AIRFLOW__METRICS__STATSD_CUSTOM_CLIENT_PATH"].endswith("statsd_client.ConnectedStatsClient"), name
    assert config["rule_files"] == ["/etc/prometheus/alerts.yml"]
    _config(prometheus, "/etc/prometheus/alerts.yml")
    # Only the two UIs reach the host, on the loopback unless UI_BIND_ADDRESS says otherwise.
    assert prometheus["ports"] == ["${UI_BIND_ADDRESS:-127.0.0.1}:${PROMETHEUS_PORT:-9090}:9090"]
    assert services["grafana"]["ports"] == ["${UI_BIND_ADDRESS:-127.0.0.1}:${GRAFANA_PORT:-3000}:3000"]
    assert "ports" not in exporter and "ports" not in services["airflow-scheduler"]


def _stream_metric_names() -> set[str]:
    """Every sample name the stream's registry exposes (counters' _total, histograms' _bucket, ...)."""
    from market_spread.observation.metrics import StreamMetrics

    metrics = StreamMetrics("files")
    metrics.backlog_files.labels("quotes").set(0)
    metrics.kafka_lag.labels("quotes").set(0)
    return {sample.name for family in metrics.registry.collect() for sample in family.samples}


def test_the_dashboard_and_alerts_name_metrics_that_exist(services):
    import json

    grafana = services["grafana"]
    provisioning = _config(grafana, "/etc/grafana/provisioning")
    dashboards = _config(grafana, "/etc/grafana/dashboards")
    [provider] = yaml.safe_load((provisioning / "dashboards" / "market-spread.yml").read_text())["providers"]
    assert provider["options"]["path"] == "/etc/grafana/dashboards"
    [source] = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())["datasources"]
    assert source["url"] == "http://prometheus:9090" and source["isDefault"]
    board = json.loads((dashboards / "market-spread.json").read_text())
    assert _env(grafana)["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"] == "/etc/grafana/dashboards/market-spread.json"
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    assert all(t["datasource"]["uid"] == source["uid"] for p in board["panels"] for t in p.get("targets", []))
    rules = yaml.safe_load(_config(services["prometheus"], "/etc/prometheus/alerts.yml").read_text())
    exprs += [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    named = {m for e in exprs for m in re.findall(r"\b(market_spread_[a-z_]+)", e)}
    assert named and named - _stream_metric_names() == set(), named - _stream_metric_names()
    mapping = yaml.safe_load((ROOT / "docker" / "prometheus" / "statsd-mapping.yml").read_text())
    airflow = {m for e in exprs for m in re.findall(r"\b(airflow_[a-z_]+)", e)}
    assert airflow and airflow <= {m["name"] for m in mapping["mappings"]}, airflow
    # Grafana's admin password is a file secret, never an environment value.
    assert _env(grafana)["GF_SECURITY_ADMIN_PASSWORD__FILE"] == "/run/secrets/grafana_admin_password"
    assert _env(grafana)["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
