"""dl.host: the plugin host: it loads plugins, checks their options and wires them into a pipeline.

- `manager`: loading the `dl` entry-point group with pluggy (`load_plugins`, `get_plugins`,
  `make_plugin_manager`); `registry`: the typed registry the `register_*` hooks fill; `options`: a
  factory's options read from its signature and docstring, and values given as text converted by their
  annotation.
- `assembly`: source -> metadata -> decoder -> loader, the one path every caller builds through, where the
  host reconciles what plugins ask of each other (`reconcile`).
- `api`: the library entry points `dl.make_dataset` and `dl.make_dataloader`.

May import: `dl.contracts`, `dl.format`, `dl.dataloader`.
"""
