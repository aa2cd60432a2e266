"""What the Airflow DAGs call: configuration, the stream supervisor, its health check, job runners.

DAG files stay thin and do no I/O at import; everything that touches files, processes or Airflow
Variables happens here, at task run time. Module-level imports are the standard library only, so
parsing a DAG file stays fast (no pyspark, no airflow-core).

- `tasks`: the task bodies the DAGs call, their default_args and schedules, the pool, the hold
- `settings`: the Settings, from Airflow Variables, the environment or defaults
- `jobs`: CLI commands as child processes (their argv, environment, output and stopping)
- `probes`: the lake, its lock and the landing folder, read without Spark; StreamHealth
- `supervisor`: runs the stream and watches it (supervise_stream)
"""
