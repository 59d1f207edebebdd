"""The single source of the trnprof version (read by pyproject and written into every trace)."""

__version__ = "0.1.0"
