"""What `dl transcode` is asked for, and the FFmpeg encoder arguments that produce it."""

from dataclasses import asdict, dataclass

from ..contracts.errors import DlError

CODECS = ("h264", "hevc", "av1")
ENCODERS = {"h264": "libx264", "hevc": "libx265", "av1": "libsvtav1"}
"""The FFmpeg encoder of each codec."""
DEFAULT_CRF = {"h264": 18, "hevc": 20, "av1": 30}
"""Constant rate factors (lower: better quality, larger files): H.264 18 and HEVC 20 are near transparent; AV1 30
is LeRobot's own setting."""
DEFAULT_PRESET = {"h264": "fast", "hevc": "fast", "av1": "10"}
"""Encoder speed presets: x264/x265 names (ultrafast ... veryslow), SVT-AV1 numbers (0 slowest ... 13 fastest)."""
PRESETS = {"h264": ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow",
                    "placebo"),
           "hevc": ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow",
                    "placebo"),
           "av1": tuple(str(p) for p in range(14))}
PIX_FMTS = ("yuv420p", "yuv420p10le", "yuv444p")
MAX_CRF = {"h264": 51, "hevc": 51, "av1": 63}


@dataclass(frozen=True)
class TranscodeOptions:
    """One `dl transcode`'s encoding.

    Attributes:
        codec: "h264", "hevc" or "av1" (encoders `ENCODERS`).
        gop: frames from one keyframe to the next (every GOP closed: no frame refers across a keyframe, so any
            keyframe is a clean seek point). LeRobot records with 2; longer GOPs give smaller files and costlier
            random access (a random frame decodes up to gop - 1 frames before it).
        crf: quality, `DEFAULT_CRF` when None.
        preset: encoder speed preset, `DEFAULT_PRESET` when None.
        pix_fmt: the output pixel format (`PIX_FMTS`).
        bframes: B-frames between reference frames (0: none, every frame decodes in presentation order).
        min_psnr_db: the lowest PSNR (dB, the average over a file's frames, new against old) a file may have; the
            transcode refuses to finish below it.
        tolerance_s: how far (s) a new frame's time may lie from its data row's timestamp (the loaders' default).

    Raises:
        DlError: (on construction) a value out of range, naming the option.
    """

    codec: str
    gop: int = 2
    crf: int | None = None
    preset: str | None = None
    pix_fmt: str = "yuv420p"
    bframes: int = 0
    min_psnr_db: float = 30.0
    tolerance_s: float = 1e-4

    def __post_init__(self):
        if self.codec not in CODECS:
            raise DlError(f"--codec must be one of {', '.join(CODECS)}, got {self.codec!r}.")
        crf = DEFAULT_CRF[self.codec] if self.crf is None else self.crf
        preset = DEFAULT_PRESET[self.codec] if self.preset is None else str(self.preset)
        object.__setattr__(self, "crf", crf)
        object.__setattr__(self, "preset", preset)
        checks = [
            (self.gop >= 1, f"--gop must be >= 1 frame, got {self.gop}"),
            (0 <= crf <= MAX_CRF[self.codec], f"--crf for {self.codec} must be 0..{MAX_CRF[self.codec]}, got {crf}"),
            (preset in PRESETS[self.codec], f"--preset for {self.codec} must be one of "
                                            f"{', '.join(PRESETS[self.codec])}, got {preset!r}"),
            (self.pix_fmt in PIX_FMTS, f"--pix-fmt must be one of {', '.join(PIX_FMTS)}, got {self.pix_fmt!r}"),
            (self.codec != "av1" or self.pix_fmt != "yuv444p", "--pix-fmt yuv444p: FFmpeg's SVT-AV1 encodes "
                                                               "yuv420p and yuv420p10le only"),
            (0 <= self.bframes <= 16, f"--bframes must be 0..16, got {self.bframes}"),
            (self.codec != "av1" or self.bframes == 0, "--bframes: AV1 has no B-frames to ask for (SVT-AV1 "
                                                       "predicts from within each closed GOP)"),
            (self.bframes < self.gop or self.bframes == 0, f"--bframes {self.bframes} needs a GOP longer than that, "
                                                          f"got --gop {self.gop}"),
            (self.tolerance_s > 0, f"--tolerance-s must be > 0, got {self.tolerance_s}"),
        ]
        for ok, message in checks:
            if not ok:
                raise DlError(f"{message}.")

    def identity(self) -> dict:
        """What a resumed transcode must share with the interrupted one (the checks' thresholds may change)."""
        return {k: v for k, v in asdict(self).items() if k not in ("min_psnr_db", "tolerance_s")}

    def encoder_args(self, threads: int) -> list[str]:
        """FFmpeg output options for the video stream: the encoder with closed GOPs of `gop` frames, `bframes`
        B-frames, no scene-cut keyframes (keyframes land every `gop` frames exactly), `threads` threads."""
        gop, b = str(self.gop), str(self.bframes)
        if self.codec == "h264":
            return ["-c:v", "libx264", "-preset", self.preset, "-crf", str(self.crf), "-g", gop, "-keyint_min", gop,
                    "-sc_threshold", "0", "-bf", b, "-flags", "+cgop", "-threads", str(threads)]
        if self.codec == "hevc":
            params = (f"keyint={gop}:min-keyint={gop}:scenecut=0:open-gop=0:bframes={b}:pools={threads}:"
                      "frame-threads=1:log-level=error")
            return ["-c:v", "libx265", "-preset", self.preset, "-crf", str(self.crf), "-x265-params", params,
                    "-tag:v", "hvc1"]
        return ["-c:v", "libsvtav1", "-preset", self.preset, "-crf", str(self.crf), "-g", gop,
                "-svtav1-params", f"lp={threads}:irefresh-type=2"]

    def describe(self) -> str:
        """In words, for messages: e.g. "h264 (libx264), GOP 2, CRF 18, preset fast, yuv420p, no B-frames"."""
        frames = "no B-frames" if not self.bframes else f"{self.bframes} B-frames"
        return (f"{self.codec} ({ENCODERS[self.codec]}), GOP {self.gop}, CRF {self.crf}, preset {self.preset}, "
                f"{self.pix_fmt}, {frames}")
