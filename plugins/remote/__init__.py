"""Sources `hub` (a dataset repo on the Hugging Face Hub) and `bucket` (any fsspec URL: s3://, gs://,
hf://buckets/..., file://, memory://), both a `dl.kits.remote.source.RemoteSource`: every read retried and
counted in one wrapper, admitted episodes prefetched into a bounded, reference-counted local cache.
`options` holds what both take, `hub` the Hub's revision pinning (used by `bucket` for metadata on the Hub)."""
