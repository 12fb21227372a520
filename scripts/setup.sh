#!/usr/bin/env bash
# One-time set-up on a fresh Debian 12 / Python 3.11 machine (idempotent: re-running is cheap):
# FFmpeg from apt when missing, a venv in .venv, the CPU builds of torch/torchcodec pinned for this machine
# kind (newer torchcodec wheels need CUDA libraries), then dl itself (editable) with its test extras.
# Each step prints a line as it starts and how long it took, whether or not the output is a terminal.
# Override the pins for other machines: DL_TORCH="torch==X" DL_TORCHCODEC="torchcodec==Y" scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

START=$SECONDS
step() { printf 'setup [%s/4] %s\n' "$1" "$2"; STEP_START=$SECONDS; }
done_step() { printf 'setup       done in %ss\n' "$((SECONDS - STEP_START))"; }

step 1 "FFmpeg (torchcodec decodes with the system FFmpeg libraries)"
if command -v ffmpeg >/dev/null 2>&1; then
  echo "setup       already installed: $(ffmpeg -version | head -n 1)"
else
  echo "setup       installing with apt-get (about a minute on a fresh machine)"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq ffmpeg >/dev/null
fi
done_step

PY=${PYTHON:-python3}
step 2 "Python virtual environment in .venv ($("$PY" --version))"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
done_step

# (this machine's pip config lists local indexes that may be absent; hide only those warnings)
pip() { .venv/bin/python -m pip --disable-pip-version-check -q "$@" 2> >(grep -v "^WARNING: Location" >&2); }
step 3 "${DL_TORCH:-torch==2.13.0} and ${DL_TORCHCODEC:-torchcodec==0.13.0} (CPU builds; the largest download)"
pip install "${DL_TORCH:-torch==2.13.0}" "${DL_TORCHCODEC:-torchcodec==0.13.0}"
done_step

step 4 "dl (editable) with its test extras"
pip install -e ".[test]"
.venv/bin/python -c "import dl, torchcodec.decoders; print('setup       dl', dl.__version__, 'ready in .venv')"
done_step
echo "setup: finished in $((SECONDS - START))s"
