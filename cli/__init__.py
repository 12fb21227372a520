"""dl.cli: the `dl` command line (click). `main` is the entry point and its error handling, `commands` the command
group; one module per command: `run`, `status` (`dl status` and `dl cancel`), `report`, `plugins`, `info`,
`validate`, `diagnose`, `synthetic_dataset`, `transcode`; with their helpers `options` (parsing values), `render`
and `labels` (the results table and its words) and `diagnosis` (the decode path `dl diagnose` walks). Command
modules import heavy packages (torch, the registry) inside the command, so `dl --help` stays fast.

May import: anything in dl (it is the outermost layer).
"""
