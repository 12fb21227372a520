"""When a GPU decoder runs here but cannot decode the dataset's codec (AV1 on an A100/H100's NVDEC): `dl run
--decoder auto` falls back to the CPU and says so in one line with the `dl transcode` command that fixes it, and `dl
diagnose` says the same, failing with `--decoder nvdec`. No GPU is lent to this machine, so the GPU decoder is a
stand-in that raises what `nvdec` raises on such a GPU (`dl.plugins.nvdec_decoder.unsupported_codec`); the real one
runs in benchmarks/nvdec_gpu.py on a GPU machine."""

from dl.bench.calibrate import calibrate_decoders
from dl.cli import diagnosis
from dl.cli.render import codec_fixes
from dl.contracts.decoder import Decoder
from dl.host.assembly import build_decoder, open_dataset
from dl.host.registry import Registry
from dl.kits.video.decoder_cache import DecoderCache
from dl.plugins.cpu_decoder import CpuDecoder
from dl.plugins.nvdec_decoder import unsupported_codec

GPU = "NVIDIA H100 80GB HBM3"


class AV1lessGpu(Decoder):
    """A decoder that builds (as nvdec does on a GPU machine) and refuses every stream as nvdec refuses AV1 on an
    H100."""

    name = "nvdec"

    def __init__(self):
        self.cache = DecoderCache(4)

    def frames_at(self, source, path, timestamps):
        raise unsupported_codec(source.url, path, "av1", GPU)

    def probe(self, source, path):
        raise unsupported_codec(source.url, path, "av1", GPU)


def test_decoder_auto_falls_back_to_the_cpu_and_prints_the_transcode_command(dataset_factory):
    root = dataset_factory(codec="av1", gop=2)
    meta = open_dataset(str(root))
    registry = Registry()
    registry.register_callback("decoder", "dl", "0", "dl.plugins.cpu_decoder")("cpu", CpuDecoder)
    registry.register_callback("decoder", "tests", "0", __name__)("nvdec", AV1lessGpu)
    calibration = calibrate_decoders(meta, list(meta.episodes.values())[:2], registry, 0.2, sequential=False)
    assert calibration["chosen"] == "cpu" and calibration["decoders"]["cpu"]["random_frames_per_s"] > 0
    gpu = calibration["decoders"]["nvdec"]
    assert gpu["unavailable"] == f"cannot decode av1 on {GPU}" and gpu["codec"] == "av1"
    (line,) = codec_fixes(calibration)
    assert line == (f"nvdec cannot decode av1 on {GPU}: decoding with cpu instead. To decode with nvdec, re-encode "
                    f"the dataset: dl transcode {root} {root}-h264 --codec h264 --gop 2")


def test_diagnose_advises_the_transcode_and_fails_with_the_gpu_decoder(dataset_factory, monkeypatch):
    root = dataset_factory(codec="av1", gop=2)
    monkeypatch.setattr(diagnosis, "build_decoder",
                        lambda name, options=None: AV1lessGpu() if name == "nvdec" else build_decoder(name, options))
    fine = diagnosis.diagnose(str(root))
    assert fine.ok and fine.advice == [f"nvdec cannot decode this dataset's av1 on this GPU ({GPU}): cpu decodes it "
                                       "on the CPU (so does dl run --decoder auto). To decode on the GPU, re-encode "
                                       f"it: dl transcode {root} {root}-h264 --codec h264 --gop 2"]
    failed = diagnosis.diagnose(str(root), decoder="nvdec")
    assert not failed.ok and failed.advice == []
    assert failed.verdict.startswith("observation.images.cam0: open failed: NVIDIA H100 80GB HBM3 cannot decode av1")
    assert failed.verdict.endswith(f"or re-encode the dataset: dl transcode {root} {root}-h264 --codec h264 --gop 2.")
