# market-spread: the two commands are `make run` and `make test`; everything else is set-up they share.
SHELL := /bin/bash
# A pipe fails when its first command does (Maven's output goes through a filter below).
.SHELLFLAGS := -o pipefail -c
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
JARS := .cache/jars
PORT ?= 8080
# make run SOURCE=kafka: a Kafka broker beside Airflow; the stream and the feed use its topics.
SOURCE ?= files
# make run STORAGE=s3: an S3 server (market-spread object-store) beside Airflow holds landing and lake.
STORAGE ?= local
# Debian's Maven 3.8 writes colour resets even in batch mode and with style.color=never: stripped, so
# that logs and CI output stay plain text.
MVN := mvn -q -B -Dstyle.color=never
NO_COLOUR := 2>&1 | sed -u 's/\x1b\[[0-9;]*m//g'
# Only the JARs Spark does not already ship: the rest (Hadoop, Jackson, Parquet, Scala) would clash.
JAR_GROUPS := io.delta,io.unitycatalog,com.fasterxml.jackson.datatype,javax.annotation,commons-logging
# Spark's Kafka source (stream --source kafka): the connector and what pyspark/jars lacks.
KAFKA_JARS := .cache/kafka-jars
KAFKA_JAR_IDS := spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2
# A single-node Kafka broker (market-spread broker), run with java -cp: every JAR it needs.
BROKER_JARS := .cache/broker-jars
# Spark's S3A connector (s3a:// paths): hadoop-aws and the AWS SDK v2 modules it loads (~9 MB, 33 JARs;
# the SDK's `bundle` is ~600 MB). Spark's own netty, httpclient, commons and slf4j JARs are left out.
S3_JARS := .cache/s3-jars
S3_JAR_GROUPS := org.apache.hadoop,software.amazon.awssdk,software.amazon.eventstream,org.reactivestreams
# The S3-compatible server of `market-spread object-store` (s3proxy, one self-contained JAR).
S3PROXY_JAR := .cache/s3proxy
# The Data Docs' CSS and scripts (their CDNs' files, from the npm registry): reports render offline.
DATADOCS_ASSETS := .cache/datadocs-assets
# Delta's log store that publishes a commit only if its version is absent (every session registers it).
LOGSTORE := .cache/logstore
LOGSTORE_SRC := jobs/market_spread/runtime/java/PutIfAbsentLogStore.java

.PHONY: setup run test test-fast lint reliability bench clean check-tools jvm-archive browser screenshots

setup: check-tools $(VENV)/.installed $(JARS)/.fetched $(KAFKA_JARS)/.fetched $(BROKER_JARS)/.fetched \
	$(S3_JARS)/.fetched $(S3PROXY_JAR)/.fetched $(DATADOCS_ASSETS)/.fetched $(LOGSTORE)/.built jvm-archive

check-tools:
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found: install Python 3.11" >&2; exit 1; }
	@command -v java >/dev/null || { echo "error: java not found: install a JDK 17 (apt-get install openjdk-17-jdk-headless)" >&2; exit 1; }
	@java -version 2>&1 | grep -qE 'version "17' || { echo "error: Spark 4.1 here is tested on Java 17; found: $$(java -version 2>&1 | head -1)" >&2; exit 1; }
	@command -v javac >/dev/null || { echo "error: javac not found: install a JDK 17 (apt-get install openjdk-17-jdk-headless)" >&2; exit 1; }
	@command -v mvn >/dev/null || { echo "error: mvn not found: install Maven (apt-get install maven) to fetch the Delta JARs" >&2; exit 1; }

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@# setuptools' box about editable installs (a warning to the build backend's own users) silenced.
	@# --no-compile: bytecode for the few modules used, on first import, not for every installed file
	@# (the install took 51 s with it, 25 s without).
	PYTHONWARNINGS=ignore $(PY) -m pip install -q --no-compile -e '.[dev]'
	@# pyspark-client (pulled by some providers) shares pyspark/ and breaks it unless versions match.
	@# pyspark and delta imported (the pair that breaks); Great Expectations and Airflow only looked up:
	@# importing them took 6 s of every fresh set-up, and the tests import them anyway.
	$(PY) -c "import pyspark, delta; from importlib.metadata import version as v; \
	    print('python packages ok: pyspark', pyspark.__version__, 'gx', v('great-expectations'), 'airflow', v('apache-airflow'))"
	@touch $@

# The Maven fetches run one after another (order-only prerequisites): two Maven processes filling one
# local repository at once can corrupt it. Under `make -j2` they run beside pip's install; Delta's and
# S3's first, which the class archive (jvm-archive) waits for.
$(JARS)/.fetched: jobs/maven/pom.xml
	@mkdir -p $(JARS)
	$(MVN) -f jobs/maven/pom.xml dependency:copy-dependencies \
	    -DoutputDirectory=$(abspath $(JARS)) -DincludeScope=runtime -DincludeGroupIds=$(JAR_GROUPS) $(NO_COLOUR)
	@ls $(JARS)/delta-spark_*.jar >/dev/null
	@touch $@

$(KAFKA_JARS)/.fetched: jobs/maven/kafka-connector-pom.xml | $(S3_JARS)/.fetched
	@mkdir -p $(KAFKA_JARS)
	$(MVN) -f jobs/maven/kafka-connector-pom.xml dependency:copy-dependencies \
	    -DoutputDirectory=$(abspath $(KAFKA_JARS)) -DincludeScope=runtime -DincludeArtifactIds=$(KAFKA_JAR_IDS) $(NO_COLOUR)
	@ls $(KAFKA_JARS)/spark-sql-kafka-*.jar $(KAFKA_JARS)/kafka-clients-*.jar >/dev/null
	@touch $@

$(BROKER_JARS)/.fetched: jobs/maven/kafka-broker-pom.xml | $(KAFKA_JARS)/.fetched
	@mkdir -p $(BROKER_JARS)
	$(MVN) -f jobs/maven/kafka-broker-pom.xml dependency:copy-dependencies \
	    -DoutputDirectory=$(abspath $(BROKER_JARS)) -DincludeScope=runtime $(NO_COLOUR)
	@ls $(BROKER_JARS)/kafka_2.13-*.jar $(BROKER_JARS)/kafka-server-*.jar >/dev/null
	@touch $@

$(S3_JARS)/.fetched: jobs/maven/s3-pom.xml | $(JARS)/.fetched
	@mkdir -p $(S3_JARS)
	$(MVN) -f jobs/maven/s3-pom.xml dependency:copy-dependencies \
	    -DoutputDirectory=$(abspath $(S3_JARS)) -DincludeScope=runtime -DincludeGroupIds=$(S3_JAR_GROUPS) $(NO_COLOUR)
	@ls $(S3_JARS)/hadoop-aws-*.jar $(S3_JARS)/s3-2.*.jar >/dev/null
	@touch $@

$(S3PROXY_JAR)/.fetched: jobs/maven/s3proxy-pom.xml | $(BROKER_JARS)/.fetched
	@mkdir -p $(S3PROXY_JAR)
	$(MVN) -f jobs/maven/s3proxy-pom.xml dependency:copy-dependencies \
	    -DoutputDirectory=$(abspath $(S3PROXY_JAR)) -DincludeScope=runtime $(NO_COLOUR)
	@ls $(S3PROXY_JAR)/s3proxy-*-jar-with-dependencies.jar >/dev/null
	@touch $@

# Optional: without npm (or the registry) the product runs and the reports render unstyled; the
# next set-up tries again (no stamp).
$(DATADOCS_ASSETS)/.fetched: jobs/market_spread/orchestration/datadocs_assets.py $(VENV)/.installed
	@if ! command -v npm >/dev/null; then \
	  echo "note: npm not found (apt-get install npm): the Data Docs reports will render without their styles"; \
	elif $(PY) -m market_spread_tools.datadocs_assets $(DATADOCS_ASSETS); then touch $@; \
	else echo "note: the Data Docs' styles could not be fetched: the reports will render without them"; fi

# The log store (runtime/java/PutIfAbsentLogStore.java), compiled against Delta's storage API and the
# Hadoop client API of pyspark's own jars/ folder; a JAR of its own, which every session's spark.jars lists.
$(LOGSTORE)/.built: $(LOGSTORE_SRC) $(VENV)/.installed $(JARS)/.fetched
	@rm -rf $(LOGSTORE)/classes && mkdir -p $(LOGSTORE)/classes
	javac --release 17 -Xlint:all -Werror -d $(LOGSTORE)/classes $(LOGSTORE_SRC) -cp "$$(ls $(JARS)/delta-storage-*.jar):$$($(PY) \
	    -c 'import glob, os, pyspark; print(*glob.glob(os.path.dirname(pyspark.__file__) + "/jars/hadoop-client-api-*.jar"))')"
	jar cf $(LOGSTORE)/market-spread-logstore.jar.tmp -C $(LOGSTORE)/classes .
	@mv $(LOGSTORE)/market-spread-logstore.jar.tmp $(LOGSTORE)/market-spread-logstore.jar && rm -rf $(LOGSTORE)/classes
	@touch $@

# The driver JVM's class-data-sharing archive (runtime/jvm_archive.py): ~4 s off every Spark start.
# Run at every set-up, not behind a stamp: it returns at once when the archive for this Java, Spark
# and JARs is there, and writes it again when it is not (new JARs, or one set aside as damaged).
# Never fatal: without the archive every command still runs, only its JVM starts slower.
jvm-archive: $(VENV)/.installed $(JARS)/.fetched $(S3_JARS)/.fetched $(LOGSTORE)/.built
	-@$(PY) -m market_spread_tools.jvm_archive

run: setup
	PORT=$(PORT) SOURCE=$(SOURCE) STORAGE=$(STORAGE) $(VENV)/bin/market-spread-run

# Two pytest workers, a test file (or a group of files sharing a live Airflow) each at a time, the
# longest first (tests/conftest.py): one worker's waits on child JVMs, brokers and Airflow are the
# other's CPU; a third took 5 % off and stretched every test (docs/performance.md). Prints the 25 slowest
# tests, the whole command's time with its set-up (budget: 20 minutes on the 2-core machine; the
# latest figure in docs/operations.md, Tests). Set-up runs two jobs at once (pip beside Maven, lint
# beside the class archive), each job's output printed whole when it ends.
TEST_WORKERS ?= 2
test:
	@export MARKET_SPREAD_TEST_BEGAN=$$(date +%s); \
	$(MAKE) --no-print-directory -j2 --output-sync=target setup browser lint && \
	$(PY) -m pytest -ra --durations=25 -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder tests

# Lint and format (ruff) and types (mypy), as configured in pyproject.toml; make test runs it first,
# beside the class archive's JVM run (it needs only the Python packages).
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check jobs dags tools tests
	$(VENV)/bin/ruff format --check jobs dags tools tests
	$(VENV)/bin/mypy jobs/market_spread dags tools

# The UI test's browser (tests/e2e/test_data_docs_ui.py): Debian's chromium and its driver, installed
# when missing and apt-get can; without them that test skips and says why.
browser:
	@{ command -v chromium && command -v chromedriver; } >/dev/null || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) >/dev/null 2>&1 || \
	  echo "note: chromium and chromium-driver could not be installed: the browser test will skip"

# The fast folders: the pure logic (no Spark) and the tests of single Spark-side parts;
# no Airflow, no broker, no lake commands, no campaigns (under 4 minutes here).
FAST_TESTS := tests/unit tests/spark
test-fast: setup
	$(PY) -m pytest -ra -m "not slow" $(FAST_TESTS)

# The full campaigns (24 kills on disk and on S3, 20 on Kafka, 1M-line file, 10 MB lines, disk full)
# (docs/operations.md, Tests); make test runs their short versions.
KAFKA_CAMPAIGN := tests/stream/test_kafka.py::test_sigkill_of_the_stream_while_producers_write_loses_and_doubles_nothing
# The bench's cluster part on a 2-worker cluster, twice: here only (make test's cluster runs are
# tests/e2e/test_cluster.py's).
BENCH_CLUSTER := tests/e2e/test_bench.py::test_cluster_part_runs_both_placements_on_a_local_cluster_with_the_same_alerts
reliability: setup
	MARKET_SPREAD_RELIABILITY=full $(PY) -m pytest -ra -s tests/reliability $(KAFKA_CAMPAIGN) $(BENCH_CLUSTER)

# The README's three screenshots, from a new run over data/screenshots/ (about 10 minutes).
screenshots: setup browser
	$(PY) -m market_spread_tools.screenshots

bench: setup
	$(VENV)/bin/market-spread bench

clean:
	rm -rf data .airflow .pytest_cache
