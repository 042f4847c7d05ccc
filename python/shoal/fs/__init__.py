"""Storage access, Hudi file naming, the file-system view, markers and partition metadata."""
