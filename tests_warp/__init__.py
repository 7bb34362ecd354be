"""Warp's own test suite run untraced and traced (``nox -s warp_suite``)."""
