"""dl.plugins: dl's built-in plugins, each registered through the `dl` entry-point group like any
third-party plugin: sources (`local_source`; `remote`: `hub` and `bucket`), loaders (`map`, `pool`:
packages holding the loader and the modules only it uses), decoders (`cpu_decoder`, `nvdec_decoder`) and
schedulers (`local_scheduler`; `slurm`).

May import: `dl.contracts`, `dl.format`, `dl.dataloader`, `dl.kits`; never another plugin (a plugin can be
disabled or replaced: a plugin package imports only itself among `dl.plugins`).
"""
