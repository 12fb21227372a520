"""What the benchmark scripts share: the team's open50 dataset and one `dl run` in a subprocess."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OPEN50 = REPO.parent / "shared" / "datasets" / "open50"
OPEN50_USABLE = "0,3-6,8,10-24,26-32,35-49"
"""open50's episodes without the flaws ../shared/datasets/README.md lists (missing or broken video, bad
timestamps), which `dl validate` refuses."""
DL = str(Path(sys.executable).with_name("dl"))
"""The `dl` command of the running venv."""


def dl_run(options: list[str], out: Path, timeout_s: float) -> dict:
    """`dl run OPTIONS --out-dir OUT` (one configuration); its first result JSON, or `{"status": "failed",
    "error": <stderr tail>}` when it exits non-zero or writes none."""
    done = subprocess.run([DL, "run", *options, "--out-dir", str(out)], capture_output=True, text=True,
                          timeout=timeout_s)
    results = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    if done.returncode or not results:
        return {"status": "failed", "error": done.stderr[-2000:]}
    return results[0]
