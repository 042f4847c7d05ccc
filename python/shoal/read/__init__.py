"""Read paths: snapshot, read-optimized, time travel, incremental and streaming."""
