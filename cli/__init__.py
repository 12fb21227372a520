"""dl.cli: the `dl` command line (click): `main` (the command group and error handling), one module per
command (`run`, `plugins`, `info`, `synthetic_dataset`), `options` (parsing values) and `render` (result
tables). Command modules import heavy packages (torch, the registry) inside the command, so `dl --help`
stays fast.

May import: anything in dl (it is the outermost layer).
"""
