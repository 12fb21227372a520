"""dl's built-in plugins. Each module is registered through the `dl` entry-point group, like any
third-party plugin."""
