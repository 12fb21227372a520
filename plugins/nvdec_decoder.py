"""Decoder `nvdec`: torchcodec on `device="cuda"`, the GPU's NVDEC engine; frames stay on the GPU.

A CUDA context cannot cross a fork, so this decoder asks for `spawn` DataLoader workers and no `pin_memory`
(the frames are already on the GPU); `dl.dataloader.build.build_dataloader` and `dl run --decoder nvdec` arrange both
and record them. Open decoders live in the process-local cache, dropped on fork and never pickled."""

from dl.contracts.errors import CodecUnsupportedError, DecoderUnavailableError, DlError, transcode_command
from dl.contracts.hookspecs import hookimpl
from dl.contracts.needs import DataLoaderNeeds
from dl.contracts.source import Source
from dl.kits.video.decoder_cache import DecoderCache
from dl.kits.video.torchcodec_video import (
    SEEK_MODES,
    TorchcodecDecoder,
    checked_resize,
    decoder_bytes,
    open_video,
    stream_facts,
)


def cuda_problems() -> list[str]:
    """Why this machine cannot decode on an NVIDIA GPU with torchcodec, one reason per item (empty: it can):
    torch without CUDA or without a visible GPU, torchcodec built without CUDA."""
    import torch

    problems = []
    if torch.version.cuda is None:
        problems.append(f"torch {torch.__version__} is a CPU build (no CUDA)")
    elif not torch.cuda.is_available():
        problems.append(f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU (is the NVIDIA driver "
                        "loaded? CUDA_VISIBLE_DEVICES?)")
    try:
        import torchcodec
    except ImportError as exc:
        problems.append(f"torchcodec cannot be imported ({exc})")
    else:
        if "+cpu" in torchcodec.__version__:
            problems.append(f"torchcodec {torchcodec.__version__} is built without CUDA (install the CUDA build of "
                            "torchcodec that matches torch)")
    return problems


def unsupported_codec(url: str, path: str, codec: str, gpu: str) -> CodecUnsupportedError:
    """The error for a stream this GPU's NVDEC cannot decode (torchcodec would silently decode it on the CPU): one
    line saying so, the fix (decode on the CPU, or re-encode with `dl transcode`) and the command."""
    hint = (" A100 and H100 have no AV1 NVDEC; Ada GPUs (L4, L40, RTX 40xx) and newer do, and AV1 is LeRobot's "
            "default codec." if codec == "av1" else "")
    fix = transcode_command(url, "h264")
    return CodecUnsupportedError(
        f"{url}/{path} is {codec}, which the NVDEC engine of this GPU ({gpu}) cannot decode.{hint} Decode on the CPU "
        f"(--decoder cpu), or re-encode the videos to H.264, which every NVDEC generation decodes: {fix}",
        codec=codec, device=gpu, fix=fix)


class NvdecDecoder(TorchcodecDecoder):
    """torchcodec `VideoDecoder` on an NVIDIA GPU (NVDEC), frames returned on the GPU (uint8 `[N, C, H, W]`
    on `device`), with an LRU of open decoders per process.

    Args:
        device: the CUDA device, e.g. "cuda" or "cuda:1".
        cache_size: decoders kept open per process. None: 16, raised by the host to what the loader reads in turn
            (`dl.host.reconcile`); a number you give is kept as given.
        cache_bytes: the most memory the open decoders of one process may hold (estimated at 8 YUV frames each).
        seek_mode: "auto" (approximate where the container header is trustworthy, exact where not),
            "approximate" or "exact", as for `cpu`.
        resize: [height, width] every frame is scaled to while it is decoded (torchcodec's `Resize`), as for `cpu`.

    Raises:
        DecoderUnavailableError: no usable GPU: torch or torchcodec built without CUDA, or no GPU visible; the
            message says which and suggests the `cpu` decoder.
        DlError: an option out of range.
    """

    name = "nvdec"

    def __init__(self, device: str = "cuda", cache_size: int | None = None, cache_bytes: int = 512_000_000,
                 seek_mode: str = "auto", resize: tuple[int, int] | None = None):
        if seek_mode not in SEEK_MODES:
            raise DlError(f"decoder nvdec: seek_mode must be one of {', '.join(SEEK_MODES)}, got {seek_mode!r}.")
        if not str(device).startswith("cuda"):
            raise DlError(f"decoder nvdec: device must be a CUDA device such as 'cuda' or 'cuda:0', got {device!r}.")
        problems = cuda_problems()
        if problems:
            raise DecoderUnavailableError(f"decoder nvdec needs an NVIDIA GPU that torch and torchcodec can use: "
                          f"{'; '.join(problems)}. Use --decoder cpu (torchcodec on the CPU) on this machine.")
        self.device, self.seek_mode = str(device), seek_mode
        self.resize = checked_resize(resize, "decoder nvdec")
        self.cache_size_chosen = cache_size is not None
        self.cache = DecoderCache(16 if cache_size is None else cache_size, cache_bytes, _bytes_of)

    def _open(self, source: Source, path: str):
        decoder = open_video(source, path, seek_mode=self.seek_mode, device=self.device, resize=self.resize)
        fallback = decoder.cpu_fallback
        if fallback:  # torchcodec decodes on the CPU what NVDEC cannot, silently
            if "NVcuvid unavailable" in str(fallback):
                raise DecoderUnavailableError(
                    "decoder nvdec: torchcodec cannot load NVIDIA's video decode library (libnvcuvid) on this machine "
                    f"({fallback}). Install the driver's decode library (e.g. Debian's libnvidia-decode, or the "
                    "container toolkit's video capability), or use --decoder cpu.")
            import torch

            gpu = torch.cuda.get_device_name(torch.device(self.device))
            raise unsupported_codec(source.url, path, decoder.metadata.codec, gpu)
        return decoder

    def probe(self, source: Source, path: str) -> dict:
        """Stream facts and seek mode; raises `CodecUnsupportedError` when this GPU cannot decode the stream."""
        return stream_facts(self._open(source, path))

    def dataloader_needs(self) -> DataLoaderNeeds:
        """`spawn` workers (a CUDA context does not survive fork) and no `pin_memory` (frames are on the GPU)."""
        return DataLoaderNeeds(multiprocessing_context="spawn", pin_memory=False)


def _bytes_of(decoder) -> int:
    return decoder_bytes(decoder, 8)


@hookimpl
def register_decoders(register):
    register("nvdec", NvdecDecoder, "torchcodec on an NVIDIA GPU (NVDEC), frames stay on the GPU; spawn workers")
