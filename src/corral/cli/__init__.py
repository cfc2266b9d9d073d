"""The `corral` command: `main.cli` is the click group, `main.main` the entry point."""
