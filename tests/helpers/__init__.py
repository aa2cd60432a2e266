"""One home for what several test files need; each module takes its arguments in one order:
where from, then where to (`land(landing, feed, lines)`, `stream(spark, landing, lake)`,
`rows(spark, lake, table)`, `symbols_file(folder, symbols)`).

- paths:    ROOT (the checkout), DAGS
- records:  feed lines (`quote`, `order`, the times `T` and `at`), bad lines by quarantine reason
- landing:  landing files written the way producers write them (aside, then renamed in; on S3 one PUT)
- storage:  the `place` fixture's Place (a test's data on local disk or on S3), `arg`, `remove`
- s3:       a real S3 server for tests (`market-spread object-store`), the session fixture `object_store`
- symbols:  the test universe `SYMBOLS` and symbol files
- lake:     the stream run in-process on the shared session, tables read back and compared
- cli:      `market-spread` as a child process
- airflow:  the environment of an Airflow child process
- campaign: the reliability campaigns' feeds, jobs, kills and accounting
"""
