"""`market-spread broker`: a single-node Apache Kafka 4.x (KRaft, broker and controller in one JVM)
on 127.0.0.1, in the foreground.

The JARs come from Maven once (`make setup` -> .cache/broker-jars, jobs/maven/kafka-broker-pom.xml);
it runs with plain `java -cp`, so no Kafka distribution is needed. The data folder holds the log
segments, the generated `server.properties` and the broker's own log (`server.log`). The storage is
formatted once (when `DIR/logs/meta.properties` is missing); a restart on the same folder keeps
every topic and offset. Ctrl-C (or SIGTERM) stops it with Kafka's controlled shutdown.
"""

from __future__ import annotations

import base64
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from market_spread.errors import UsageError
from market_spread.feeds.foreground import forward_stop_signals

# What BrokerProcess runs: `market-spread broker` by its module (see BrokerProcess.start).
BROKER_MODULE = "market_spread.cli.commands.broker"
# Values of up to 2 MB and more must pass (contract: a huge line is quarantined, not lost).
MAX_MESSAGE_BYTES = 8 * 1024 * 1024
DEFAULT_PARTITIONS = 4


def broker_jars() -> list[str]:
    # Imported here: runtime.spark loads pyspark, and `market-spread --help` imports this module.
    from market_spread.runtime.spark import MissingJars, cached_jars

    try:
        return cached_jars("MARKET_SPREAD_BROKER_JARS", "broker-jars", "kafka_2.13-", "Kafka broker")
    except MissingJars as exc:
        raise UsageError(str(exc)) from None


def server_properties(data: Path, port: int, controller_port: int, partitions: int = DEFAULT_PARTITIONS) -> str:
    """The broker's configuration: one node, both roles, loopback only, replication factor 1."""
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str((data / "logs").resolve()),
        "num.partitions": str(partitions),
        # A topic the stream is told to read must exist: a typo is an error, not a new empty topic.
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "message.max.bytes": str(MAX_MESSAGE_BYTES),
        "replica.fetch.max.bytes": str(MAX_MESSAGE_BYTES),
        # Records stay a week (Kafka's default); the stream's checkpoint must not fall further behind.
        "log.retention.hours": "168",
        "num.network.threads": "2",
        "num.io.threads": "2",
        "background.threads": "2",
        "log.cleaner.threads": "1",
        "num.recovery.threads.per.data.dir": "1",
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


LOG4J = """log4j.rootLogger=INFO, file, stdout
log4j.appender.file=org.apache.log4j.RollingFileAppender
log4j.appender.file.File={log}
log4j.appender.file.MaxFileSize=20MB
log4j.appender.file.MaxBackupIndex=2
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.Threshold=WARN
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=broker: [%d] %p %m (%c)%n
"""


# Kafka logs through slf4j -> reload4j (LOG4J above); a few classes use the log4j2 API directly,
# and log4j2 complains on stderr when it has no configuration: give it a silent one.
LOG4J2 = """status = off
appender.null.type = Null
appender.null.name = null
rootLogger.level = off
rootLogger.appenderRef.null.ref = null
"""


def new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding (Kafka's Uuid text).

    Never one that starts with "-": the storage tool would take it for an option and fail (1 start
    in 64 did, in CI). Kafka's own Uuid.randomUuid() draws again for the same reason."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def java_command(data: Path, heap: str, main: list[str]) -> list[str]:
    return [
        os.environ.get("JAVA", "java"),
        f"-Xmx{heap}",
        "-Xms64m",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-Djava.awt.headless=true",
        f"-Dlog4j.configuration=file:{(data / 'log4j.properties').resolve()}",
        f"-Dlog4j2.configurationFile={(data / 'log4j2.properties').resolve()}",
        "-cp",
        ":".join(broker_jars()),
        *main,
    ]


def prepare(data: Path, port: int, controller_port: int, heap: str) -> Path:
    """Write the configuration and format the storage the first time; returns server.properties."""
    data.mkdir(parents=True, exist_ok=True)
    config = data / "server.properties"
    config.write_text(server_properties(data, port, controller_port), encoding="utf-8")
    (data / "log4j.properties").write_text(LOG4J.format(log=(data / "server.log").resolve()), encoding="utf-8")
    (data / "log4j2.properties").write_text(LOG4J2, encoding="utf-8")
    if not (data / "logs" / "meta.properties").exists():
        cluster_id = new_cluster_id()
        done = subprocess.run(
            java_command(data, "256m", ["kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)]),
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"formatting the broker storage failed: {(done.stderr or done.stdout).strip()[-500:]}")
    return config


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def wait_ready(bootstrap: str, timeout: float, process: subprocess.Popen | None = None) -> bool:
    """True once the broker answers a metadata request (the port alone opens before it serves)."""
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + timeout
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, "logger": _quiet_logger()})
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            return False
        try:
            metadata = admin.list_topics(timeout=2)
            if metadata.brokers:
                return True
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(0.5)
    return False


def _quiet_logger():
    logger = logging.getLogger("market_spread.kafka_client")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


@dataclass(frozen=True)
class BrokerSpec:
    """One broker: its data folder, its two ports on 127.0.0.1, the JVM heap."""

    data: Path = Path("data/kafka")  # kept across restarts
    port: int = 9092  # clients
    controller_port: int = 0  # KRaft controller; 0: port + 1000
    heap: str = "512m"
    ready_timeout: float = 120.0  # seconds to wait for the broker to accept clients


def run_broker(spec: BrokerSpec) -> int:
    """Run the broker in the foreground until SIGINT/SIGTERM; the exit code (0 once stopped by a
    signal, 1 when it cannot start or Kafka exits). UsageError for ports or a folder that cannot be used."""
    controller_port = _check(spec)
    data = spec.data
    for port in (spec.port, controller_port):
        if port_open(port):
            print(f"market-spread broker: error: port {port} on 127.0.0.1 is already in use", file=sys.stderr)
            return 1
    try:
        config = prepare(data, spec.port, controller_port, spec.heap)
    except RuntimeError as exc:
        print(f"market-spread broker: error: {exc}", file=sys.stderr)
        return 1
    bootstrap = f"127.0.0.1:{spec.port}"
    process = subprocess.Popen(java_command(data, spec.heap, ["kafka.Kafka", str(config)]))
    stopping = forward_stop_signals(process, "market-spread broker")
    print(f"market-spread broker: starting Kafka on {bootstrap} (data {data}, log {data / 'server.log'})", flush=True)
    if wait_ready(bootstrap, spec.ready_timeout, process):
        print(f"market-spread broker: ready on {bootstrap}", flush=True)
    elif process.poll() is None and not stopping:
        print(
            f"market-spread broker: error: not ready after {spec.ready_timeout:.0f}s; see {data / 'server.log'}",
            file=sys.stderr,
            flush=True,
        )
        process.terminate()
    try:
        code = process.wait(timeout=None)
    except KeyboardInterrupt:
        code = process.wait()
    if stopping:
        print("market-spread broker: stopped", flush=True)
        return 0
    print(f"market-spread broker: error: Kafka exited with code {code}; see {data / 'server.log'}", file=sys.stderr)
    return 1


def _check(spec: BrokerSpec) -> int:
    """UsageError for ports or a data folder that cannot be used; the controller's port."""
    for name, value in (("port", spec.port), ("controller_port", spec.controller_port)):
        if not (0 <= value <= 65535) or (name == "port" and value == 0):
            raise UsageError(f"--{name.replace('_', '-')} must be a TCP port, got {value}")
    controller_port = spec.controller_port or spec.port + 1000
    if controller_port > 65535 or controller_port == spec.port:
        raise UsageError("--controller-port must be a free port other than --port")
    if spec.data.exists() and not spec.data.is_dir():
        raise UsageError(f"--data is not a folder: {spec.data}")
    return controller_port


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class BrokerProcess:
    """`market-spread broker` as a background process in a session of its own: for tests, the
    benchmark and `make run SOURCE=kafka`. Ports are fixed at construction (free ones by default),
    so a stop and start keeps the same address and, through `data`, the same topics and offsets."""

    def __init__(
        self,
        data: Path,
        port: int = 0,
        controller_port: int = 0,
        heap: str = "512m",
        log: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.data = Path(data)
        self.port = port or free_port()
        self.controller_port = controller_port or free_port()
        self.heap = heap
        self.log = Path(log) if log else self.data.parent / f"{self.data.name}-broker.out"
        self.env = env
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 180.0) -> str:
        """Start it and wait until it serves clients; returns the bootstrap address."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        out = open(self.log, "ab")
        # The `broker` command's own module, not `market-spread`: `make run` stops CLI jobs first and
        # the broker last, after the stream has finished its batch in flight.
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                BROKER_MODULE,
                "--port",
                str(self.port),
                "--controller-port",
                str(self.controller_port),
                "--data",
                str(self.data),
                "--heap",
                self.heap,
                "--ready-timeout",
                str(timeout),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=self.env,
        )
        out.close()
        if not wait_ready(self.bootstrap, timeout, self.process):
            tail = self.log.read_bytes()[-2000:].decode("utf-8", "replace")
            self.stop()
            raise RuntimeError(f"the Kafka broker did not start on {self.bootstrap}:\n{tail}")
        return self.bootstrap

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 60.0) -> None:
        """Controlled shutdown (SIGTERM to the wrapper, which stops Kafka); SIGKILL of the whole
        group if it takes longer than `timeout`."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # the JVM, should the wrapper have gone first
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()
        deadline = time.monotonic() + 30
        while port_open(self.port) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.process = None
