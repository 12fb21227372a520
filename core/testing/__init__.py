"""dl.testing: what a plugin author needs to test a plugin against dl.

- `synthetic`: format-true LeRobot v3.0 datasets with real FFmpeg-encoded video, every value a function
  of its frame's global index, and every frame drawing that index (`frame_code` / `read_frame_code`).
- `source_suite`, `loader_suite`, `decoder_suite`: conformance suites, pytest classes to subclass in
  a plugin's own tests (see docs/plugins.md, "Conformance suites"); they need pytest and hypothesis (dl's extra
  `testing`). Their multi-process tests are marked `slow` (register the marker; deselect with `-m "not slow"`),
  and `examples.scaled` sizes their hypothesis examples to the loaded profile.
- `renamed`: a copy of a dataset with its features renamed, as another robot names them (mixtures' members).
- `s3_server`, `hub_server`, `fault_proxy`: real protocol peers on loopback for remote sources: moto's
  S3 server, a server of the Hub API endpoints huggingface_hub reads a dataset repo with, and a TCP proxy
  adding latency, a bandwidth cap, resets, 429s and 503s; `serve`: `python -m dl.testing.serve DATASET`.

May import: `dl.contracts`, `dl.host`, `dl.format`, `dl.dataloader`; the suites also pytest and hypothesis,
`s3_server` moto. Plugins are reached through the registry. Importing this package imports neither pytest
nor torch.
"""
