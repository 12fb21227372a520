#!/usr/bin/env bash
# One-time set-up on a fresh Debian 12 / Python 3.11 machine (idempotent: re-running is cheap):
# FFmpeg from apt when missing, SLURM + munge from apt when missing (the tests start a real SLURM cluster on
# localhost; DL_NO_SLURM=1 skips it, and those tests then skip), a venv in .venv, the CPU builds of
# torch/torchcodec pinned for this machine kind (newer torchcodec wheels need CUDA libraries), then dl
# itself (editable) with its test extras.
# Override the pins for other machines: DL_TORCH="torch==X" DL_TORCHCODEC="torchcodec==Y" scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
APT_UPDATED=""
apt_install() {
  [ -n "$APT_UPDATED" ] || { $SUDO apt-get update -qq; APT_UPDATED=1; }
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}
if ! command -v ffmpeg >/dev/null 2>&1; then
  echo "setup: installing ffmpeg (torchcodec decodes with the system FFmpeg libraries)"
  apt_install ffmpeg
fi
if [ -z "${DL_NO_SLURM:-}" ] && ! [ -x /usr/sbin/slurmctld ] && command -v apt-get >/dev/null 2>&1; then
  echo "setup: installing slurmctld, slurmd, slurm-client and munge (the tests run a SLURM cluster on localhost)"
  apt_install --no-install-recommends slurmctld slurmd slurm-client munge
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# (this machine's pip config lists local indexes that may be absent; hide only those warnings)
pip() { .venv/bin/python -m pip --disable-pip-version-check -q "$@" 2> >(grep -v "^WARNING: Location" >&2); }
pip install "${DL_TORCH:-torch==2.13.0}" "${DL_TORCHCODEC:-torchcodec==0.13.0}"
pip install -e ".[test]"
.venv/bin/python -c "import dl, torchcodec.decoders; print('setup: dl', dl.__version__, 'ready in .venv')"
