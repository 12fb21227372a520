#!/bin/bash
# benchmarks/nvdec_gpu.py on a GPU machine with no network, from what benchmarks/offline_gpu/bundle.sh made. Run from
# the checkout's root with the Python that has torch for CUDA 13 and dl's other dependencies (nothing is fetched):
# unpacks FFmpeg, installs the torchcodec wheel and this checkout, decodes one frame on the GPU to check that
# torchcodec loads and reaches NVDEC (it stops there if not), then runs the script.
#
#   benchmarks/offline_gpu/run.sh BUNDLE OUT [nvdec_gpu.py options...]    # OUT gets probe.txt, bench.log and
#                                                                          # nvdec_gpu.json
# Environment: BENCH_S, the script's time limit in seconds (default 3000; its report keeps the sections it finished).
set -u
BUNDLE=$(realpath "$1")
OUT=$(realpath -m "$2")
shift 2
FFMPEG_DIR=$(mktemp -d)
mkdir -p "$OUT"
tar -xJf "$BUNDLE/ffmpeg.tar.xz" -C "$FFMPEG_DIR" || exit 3
# torchcodec loads libcudart and libnvrtc by name; torch's CUDA wheels keep them in site-packages/nvidia/*/lib
NVIDIA_LIBS=$(python3 -c 'import glob, site; print(":".join(d for s in site.getsitepackages()
                                                        for d in glob.glob(s + "/nvidia/**/lib", recursive=True)))')
export PATH=$FFMPEG_DIR/bin:$PATH PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$FFMPEG_DIR/lib:$NVIDIA_LIBS:${LD_LIBRARY_PATH:-}
python3 -m pip install -q --no-index --no-deps --no-build-isolation "$BUNDLE"/torchcodec-*.whl -e . || exit 4
VIDEO=$(find "$BUNDLE/work" -path "*h264*" -name "*.mp4" | sort | head -1)
timeout 300 python3 - "$VIDEO" <<'EOF' 2>&1 | tee "$OUT/probe.txt"
import sys

import torch
import torchcodec
from torchcodec._core import ops
from torchcodec.decoders import VideoDecoder

print(f"torch {torch.__version__}, torchcodec {torchcodec.__version__} on FFmpeg {ops.ffmpeg_major_version}, "
      f"{torch.cuda.get_device_name(0)}")
on_gpu = VideoDecoder(sys.argv[1], device="cuda")
if on_gpu.cpu_fallback:
    sys.exit(f"torchcodec decodes {sys.argv[1]} on the CPU: {on_gpu.cpu_fallback}")
gpu = on_gpu.get_frames_at([0, 1, 5]).data
cpu = VideoDecoder(sys.argv[1]).get_frames_at([0, 1, 5]).data
print(f"NVDEC frames {tuple(gpu.shape)} on {gpu.device}; mean absolute difference from the CPU's "
      f"{(gpu.cpu().float() - cpu.float()).abs().mean().item():.2f} (0-255)")
EOF
[ "${PIPESTATUS[0]}" = 0 ] || exit 5
timeout "${BENCH_S:-3000}" python3 benchmarks/nvdec_gpu.py --work "$BUNDLE/work" --out "$OUT/nvdec_gpu.json" "$@" \
    > "$OUT/bench.log" 2>&1
status=$?
tail -c 6000 "$OUT/bench.log"
exit $status
