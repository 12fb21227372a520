"""dl.contracts: what a plugin implements and what it is handed, as plain Python (no torch at import).

- `hookspecs`: the four `register_*` hooks and the `hookimpl` marker.
- `source`: `Source` (where a dataset's files live; the one read path) and `FileSpan`.
- `decoder`: `Decoder`, `FrameRequest`, `DecodedFrames`, `OpenDecoders` and the codec names.
- `loader`: the `Loader` protocol and its optional capabilities (`Resumable`, `ReportsStats`, `DefersFloat`,
  `OpensFiles`, `ServesConsumers`), and `Composite`, a loader made of loaders; `resume`: `ResumePosition` and
  `Segment`, where a resumable loader stands.
- `scheduler`: `Scheduler`, `Run`, `RunStatus`, `Submission`.
- `config`: `LoaderConfig`, what every loader honours; `needs`: `DataLoaderNeeds`, what a plugin needs of
  the torch DataLoader; `errors`: every error dl raises on purpose; `extras`: optional dependencies and the error
  naming the extra to install; `units`: byte sizes in options.

May import: nothing else of dl.
For annotations only: `dl.format` (a loader is built on a `DatasetMeta`).
"""
