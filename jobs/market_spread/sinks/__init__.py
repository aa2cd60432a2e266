"""Where committed alerts go beyond the lake: the alerts topic (contract 4b)."""
