#!/usr/bin/env bash
# The peer loaders' environments for `dl run --loader map,pool,lerobot,lerobot-stream,lance,ray,daft`: the team's
# ../shared/anchors/peers/setup.sh (LeRobot 0.6.1's venv06, then lance, ray and daft venvs in $ANCHOR_DIR; about 10
# minutes and 15 GB on a fresh machine), then this checkout installed into each (editable), so each peer's runs
# start there (`dl.plugins.peers.environments`). Idempotent. DL_PEERS_DIR / ANCHOR_DIR name the folder.
set -euo pipefail
cd "$(dirname "$0")/.."
A=${DL_PEERS_DIR:-${ANCHOR_DIR:-${TMPDIR:-/tmp}/anchor}}
SHARED=${DL_SHARED:-../shared}
START=$SECONDS
quiet() { grep -v "^WARNING: Location" || true; }
echo "setup_peers [1/3] LeRobot 0.6.1 and dl in $A/venv06 (scripts/setup_lerobot.sh)"
ANCHOR_DIR=$A scripts/setup_lerobot.sh | tail -1
echo "setup_peers [2/3] the peers' venvs ($SHARED/anchors/peers/setup.sh)"
ANCHOR_DIR=$A bash "$SHARED/anchors/peers/setup.sh"
echo "setup_peers [3/3] dl into the lance, ray (copies of venv06: keep its pins) and daft venvs"
for venv in lance ray; do
  "$A/$venv/bin/python" -m pip install -q --no-deps -e . 2>&1 | quiet
done
"$A/daft/bin/python" -m pip install -q -e . "torch==2.13.0" "torchcodec==0.13.0" 2>&1 | quiet
for venv in venv06 lance ray daft; do
  HF_HUB_OFFLINE=1 "$A/$venv/bin/python" -c "import dl.plugins.peers; print('$venv: dl', __import__('dl').__version__)"
done
echo "setup_peers: finished in $((SECONDS - START))s; DL_PEERS_DIR=$A"
