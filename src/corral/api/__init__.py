"""See the module docstrings; this package exposes its modules, not names."""
