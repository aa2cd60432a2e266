"""The `market-spread` commands, one module each: its options (click), the typed spec it builds from
them, and one call into the feature that does the work. cli.main lists them by module name
(COMMANDS), so the rest of cli/ (main, params, options) imports no feature.

Each module exposes `command: click.Command`; its callback returns the exit code."""
