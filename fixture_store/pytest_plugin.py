"""pytest plugin entry point (registered under ``pytest11``)."""
