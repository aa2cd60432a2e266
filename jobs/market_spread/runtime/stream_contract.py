"""What the stream job shares with the processes that watch it: the writer lock's file in the lake
and the exit codes. Its own module, standard library only, so the Airflow side can read them without
importing the stream job (which pulls in pyspark)."""

from __future__ import annotations

LOCK_FILE = "_stream.lock"
# The stream's default checkpoint inside the lake (lake.tables.CHECKPOINT_SUBDIR, which must agree).
CHECKPOINT_SUBDIR = "_checkpoints/stream"
EXIT_LAKE_BUSY = 3  # another writer holds the lake's lock
EXIT_REFUSED = 4  # starting would re-emit alerts or mix sources: a person must decide
EXIT_FEATURE = 5  # a table has a Delta feature no library the product uses can write (lake.protocol)

# Where a batch's kernel runs (`stream --placement`: stream.placement).
PLACEMENTS = ("auto", "driver", "executors")
