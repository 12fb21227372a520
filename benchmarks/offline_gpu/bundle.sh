#!/bin/bash
# What benchmarks/nvdec_gpu.py needs on a GPU machine that has torch for CUDA 13 (2.11 or later) but no FFmpeg, no
# torchcodec and no network, made on a Debian 12 machine that reaches Debian's and PyPI's mirrors (as root, from the
# checkout's root, with the checkout's .venv set up):
#   BUNDLE/ffmpeg.tar.xz     FFmpeg built from Debian's source package: the shared libraries torchcodec loads and the
#                            ffmpeg/ffprobe commands (the datasets, the decoder suite's reference frames), with
#                            NVDEC/CUVID, libx264, libx265, SVT-AV1 and dav1d, those libraries inside (~12 MB)
#   BUNDLE/torchcodec-*.whl  PyPI's torchcodec for the GPU machine's Python: from 0.14 on a CUDA 13 build on torch's
#                            stable ABI, which torch 2.11's libraries export in full
#   BUNDLE/work/             the script's datasets: a generated AV1 GOP-2 source and its H.264, HEVC and AV1
#                            transcodes (~10 MB)
# Then carry BUNDLE with the checkout and run benchmarks/offline_gpu/run.sh there.
#
#   benchmarks/offline_gpu/bundle.sh [BUNDLE]     # BUNDLE defaults to .gpu (ignore it in git); ~10 min on 2 cores
# Environment: PYTHON_VERSION (the GPU machine's, default 3.12), TORCHCODEC (default 0.14.0).
set -euo pipefail
BUNDLE=$(realpath -m "${1:-.gpu}")
BUILD=$(mktemp -d)
trap 'rm -rf "$BUILD"' EXIT
mkdir -p "$BUNDLE" "$BUILD/lists/partial"
chmod 755 "$BUILD"  # apt downloads as its own user, _apt

echo "FFmpeg: build dependencies, Debian's source package, configure, make (log: $BUNDLE/ffmpeg-build.log)"
apt-get install -y -qq nasm pkg-config build-essential libx264-dev libx265-dev libsvtav1enc-dev libdav1d-dev \
    libffmpeg-nvenc-dev > /dev/null
# the source package through a list of this script's own: the machine's apt configuration is left as it is
printf 'deb-src http://deb.debian.org/debian bookworm main\ndeb-src http://deb.debian.org/debian-security %s\n' \
    'bookworm-security main' > "$BUILD/sources.list"
APT=(-o "Dir::Etc::SourceList=$BUILD/sources.list" -o Dir::Etc::SourceParts=/nonexistent
     -o "Dir::State::Lists=$BUILD/lists")
apt-get "${APT[@]}" update -qq
(cd "$BUILD" && apt-get "${APT[@]}" source --download-only ffmpeg > /dev/null 2>&1 && tar xf ffmpeg_*.orig.tar.xz)
cd "$BUILD"/ffmpeg-*/
{
    # no autodetected libraries: only the ones named, so that the bundle needs nothing the GPU machine may lack
    ./configure --prefix="$BUILD/out" --enable-shared --disable-static --enable-gpl --disable-doc --disable-debug \
        --disable-autodetect --enable-pthreads --enable-libx264 --enable-libx265 --enable-libsvtav1 \
        --enable-libdav1d --enable-ffnvcodec --enable-nvdec --enable-cuvid --disable-ffplay
    make -j"$(nproc)"
    make install
} > "$BUNDLE/ffmpeg-build.log" 2>&1
cd - > /dev/null
# the encoders' and dav1d's libraries go along; the C and C++ runtimes are the GPU machine's own
LD_LIBRARY_PATH="$BUILD/out/lib" ldd "$BUILD"/out/bin/* "$BUILD"/out/lib/lib*.so.*.*.* | awk '/=>/ {print $3}' |
    grep -v -E "^$BUILD|/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt)\.so" | sort -u |
    xargs -I{} cp -L {} "$BUILD/out/lib/"
tar -C "$BUILD/out" -cJf "$BUNDLE/ffmpeg.tar.xz" bin lib

echo "torchcodec ${TORCHCODEC:-0.14.0} for Python ${PYTHON_VERSION:-3.12}"
rm -f "$BUNDLE"/torchcodec-*.whl
python3 -m pip download -q --no-deps --only-binary=:all: --implementation cp --python-version "${PYTHON_VERSION:-3.12}" \
    --platform manylinux_2_28_x86_64 -d "$BUNDLE" "torchcodec==${TORCHCODEC:-0.14.0}"

echo "datasets"
.venv/bin/python benchmarks/nvdec_gpu.py --datasets-only --work "$BUNDLE/work"
du -sh "$BUNDLE"
