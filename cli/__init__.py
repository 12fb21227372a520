"""The `dl` command line."""
