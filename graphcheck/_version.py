"""graphcheck's version (read by the build from here)."""

__version__ = "0.2.0"
