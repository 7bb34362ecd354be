"""Realistic Warp producers whose capture sites graphcheck validates: run each as a script, or import it."""
