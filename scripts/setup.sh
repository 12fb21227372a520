#!/usr/bin/env bash
# One-time set-up on a fresh Debian 12 / Python 3.11 machine (idempotent: re-running is cheap).
#   scripts/setup.sh          what every command the README shows needs: FFmpeg from apt when missing, a venv in
#                             .venv, the CPU builds of torch/torchcodec pinned for this machine kind (newer torchcodec
#                             wheels need CUDA libraries), then dl itself (editable) with its extras `plot`
#                             (`dl report --plot`) and `testing` (the loopback S3 server of `--scenario stream_bucket`).
#   scripts/setup.sh --tests  also what the tests need: SLURM + munge from apt (the tests start a real two-node
#                             SLURM cluster on localhost; DL_NO_SLURM=1 skips it, and those tests then skip saying
#                             why) and dl's test extras.
# Each step prints a line as it starts and how long it took, whether or not the output is a terminal.
# Override the pins for other machines: DL_TORCH="torch==X" DL_TORCHCODEC="torchcodec==Y" scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

TESTS=""
case "${1:-}" in
  --tests) TESTS=1 ;;
  "") ;;
  *) echo "usage: scripts/setup.sh [--tests]" >&2; exit 2 ;;
esac

START=$SECONDS
step() { printf 'setup [%s/5] %s\n' "$1" "$2"; STEP_START=$SECONDS; }
done_step() { printf 'setup       done in %ss\n' "$((SECONDS - STEP_START))"; }
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
APT_UPDATED=""
apt_install() {
  [ -n "$APT_UPDATED" ] || { $SUDO apt-get update -qq; APT_UPDATED=1; }
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

step 1 "FFmpeg (torchcodec decodes with the system FFmpeg libraries)"
if command -v ffmpeg >/dev/null 2>&1; then
  echo "setup       already installed: $(ffmpeg -version | head -n 1)"
else
  echo "setup       installing with apt-get (about a minute on a fresh machine)"
  apt_install ffmpeg
fi
done_step

step 2 "SLURM and munge for the tests' local cluster (--tests only)"
if [ -z "$TESTS" ]; then
  echo "setup       skipped: not needed to run dl"
elif [ -n "${DL_NO_SLURM:-}" ]; then
  echo "setup       skipped: DL_NO_SLURM is set (the SLURM tests will skip)"
elif [ -x /usr/sbin/slurmctld ]; then
  echo "setup       already installed"
elif command -v apt-get >/dev/null 2>&1; then
  echo "setup       installing slurmctld, slurmd, slurm-client and munge with apt-get"
  apt_install --no-install-recommends slurmctld slurmd slurm-client munge
else
  echo "setup       no apt-get here: the SLURM tests will skip"
fi
done_step

PY=${PYTHON:-python3}
step 3 "Python virtual environment in .venv ($("$PY" --version))"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
done_step

# (this machine's pip config lists local indexes that may be absent; hide only those warnings)
pip() { .venv/bin/python -m pip --disable-pip-version-check -q "$@" 2> >(grep -v "^WARNING: Location" >&2); }
step 4 "${DL_TORCH:-torch==2.13.0} and ${DL_TORCHCODEC:-torchcodec==0.13.0} (CPU builds; the largest download)"
pip install "${DL_TORCH:-torch==2.13.0}" "${DL_TORCHCODEC:-torchcodec==0.13.0}"
done_step

EXTRAS=plot,testing; [ -z "$TESTS" ] || EXTRAS=test
step 5 "dl (editable) with its extras [$EXTRAS]"
pip install -e ".[$EXTRAS]"
.venv/bin/python -c "import dl, torchcodec.decoders; print('setup       dl', dl.__version__, 'ready in .venv')"
done_step
echo "setup: finished in $((SECONDS - START))s"
