"""dl.bench: the benchmark behind `dl run`.

- `spec`: `RunSpec`, one run's whole configuration (JSON, shipped to the run's process);
  `scenarios` and `modes`: presets and the `delta_timestamps` of each mode; `resources`: what a run
  asks of a cluster.
- `session`: the host side: plan runs, submit them to a scheduler, follow them, merge ranks, write results.
- `runner`: one run in its own process (`python -m dl.bench.runner SPEC RESULT`), in phases: `single_process`
  (the pass without workers) and `window` (the DataLoader's steady window), which report through `phase`.
- `metrics`, `memory`, `timed_decoder`, `timeline`: what a run measures; `results`: result files and the
  merge of a multi-rank run; `progress`: progress bars; `default_dataset`: the embedded dataset;
  `loopback`: serving a local folder on loopback for the remote-source scenarios.
- `report`, `plot`: `dl report`, comparing many results (the plots need the `plot` extra, matplotlib).
- `mixture_run`: `dl run --mix`, runs over a mixture of datasets (`dl.mixture`).

May import: `dl.contracts`, `dl.host`, `dl.format`, `dl.dataloader`, `dl.mixture`, `dl.kits.paths`,
`dl.testing.synthetic` (the default dataset) and its loopback servers (`dl.testing.s3_server`,
`dl.testing.hub_server`). Plugins are reached only through the registry, never imported.
"""
