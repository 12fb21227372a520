#!/usr/bin/env bash
# LeRobot 0.6.1 (the current release) with its `training` extra, and dl installed into its environment, for
# `dl train` (LeRobot's own lerobot-train on dl) and tests/test_lerobot_train.py. Idempotent.
#   scripts/setup_lerobot.sh        builds $ANCHOR_DIR/venv06 with ../shared/anchors/lerobot/setup06.sh (Python 3.12,
#                                   PyPI's torch 2.11 and torchcodec 0.11.1; about 5 minutes and 4.7 GB on a fresh
#                                   machine), then installs this checkout into it (editable, with the test extras),
#                                   keeping LeRobot's own pins (fsspec: its `datasets` caps it; s3fs in step with it).
# Prints the venv's python last: run `$ANCHOR_DIR/venv06/bin/dl train ...` or its pytest from there.
set -euo pipefail
cd "$(dirname "$0")/.."
A=${ANCHOR_DIR:-${TMPDIR:-/tmp}/anchor}
SHARED=${DL_SHARED:-../shared}
START=$SECONDS
echo "setup_lerobot [1/2] LeRobot 0.6.1 in $A/venv06 (../shared/anchors/lerobot/setup06.sh)"
ANCHOR_DIR=$A bash "$SHARED/anchors/lerobot/setup06.sh"
py=$A/venv06/bin/python
echo "setup_lerobot [2/2] dl (editable, extras testing) and LeRobot's diffusion extra into it, its pins kept"
fsspec=$("$py" -c "import fsspec; print(fsspec.__version__)")
"$py" -m pip install -q -e '.[testing]' "lerobot[diffusion]==0.6.1" "torch==2.11.0" "fsspec==$fsspec" "s3fs==$fsspec" \
  "pytest-timeout>=2.3" 2>&1 \
  | { grep -v "^WARNING: Location" || true; }
HF_HUB_OFFLINE=1 "$py" -c "import dl, lerobot.scripts.lerobot_train, torch; print('dl', dl.__version__, 'with LeRobot', \
__import__('lerobot').__version__, 'torch', torch.__version__)"
echo "setup_lerobot: finished in $((SECONDS - START))s; python: $py"
