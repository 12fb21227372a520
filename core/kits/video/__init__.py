"""dl.kits.video: the kit video decoders build on: `torchcodec_video` and `decoder_cache`."""
