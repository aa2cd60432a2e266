"""The batch kernel: every rule of a micro-batch written once over Arrow, pure (no Spark, Delta,
files or network). A landing line to a typed row or a quarantine reason (`layout`, `file_json`,
`line_rows`, `certain_lines`, `bad_lines`), quote order, newest quote per symbol, the as-of choice
and the reject rule (`columns`), alert and history rows (`rows`), and the whole batch's steps
(`steps`). Spark places it: in the driver process or inside Spark's tasks (stream.placement)."""
