"""Task functions: ``(plain-data spec, Arrow records) -> result``, run by any executor."""
