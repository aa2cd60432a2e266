"""The validate command's defaults, in a module that imports nothing: the CLI shows them in its
options' help, and `market-spread --help` must not load Spark (quality.slices and quality.validate
import the lake's tables, hence pyspark)."""

from __future__ import annotations

from pathlib import Path

DEFAULT_DOCS = Path("data") / "quality"
# How long alerts of a batch without a batch_metrics row may wait for that row: long enough for a
# batch in flight (a few seconds to minutes), short enough that a batch that never finishes is
# reported as orphaned within one quality schedule or two instead of holding the mark back forever.
DEFAULT_ORPHAN_GRACE_S = 600.0
