"""The `market-spread` commands, one module each: its options (click) and the call into the feature
that does the work. cli.main lists them by module name (COMMANDS), so the command-line plumbing in
cli/ stays below the features it serves.

Each module exposes `command: click.Command`; its callback returns the exit code."""
