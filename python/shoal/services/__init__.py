"""Table services: rollback, and (later) compaction, clean, archival, savepoint and restore."""
