"""dl.plugins: dl's built-in plugins, each registered through the `dl` entry-point group like any
third-party plugin: sources (`local_source`; `remote`: `hub` and `bucket`), loaders (`map`, `pool`:
packages holding the loader and the modules only it uses), decoders (`cpu_decoder`), schedulers
(`local_scheduler`).

May import: `dl`'s top level (contracts), `dl.format`. Never: `dl.bench`, `dl.testing`, `dl.cli`, or
another plugin (a plugin can be disabled or replaced).
"""
