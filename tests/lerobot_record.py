"""Runs `dl train` (LeRobot's lerobot-train on dl) and records, per step, what the training loop got: the batch's
`index` (and `dataset_index`) values before LeRobot's preprocessor, and the step's loss. Used by
tests/test_lerobot_train.py in LeRobot 0.6.1's environment:

    python tests/lerobot_record.py OUT.json [dl train arguments...]

Writes OUT.json (rank 0) or OUT.rank{r}.json: `{"rank", "world_size", "indices": [[...] per step],
"dataset_index": [[...] per step], "losses": [...]}`. The recording wraps two names of lerobot-train's module
(`cycle`, `update_policy`) in this process, as `dl train` wraps others; LeRobot's files are not touched."""

import json
import os
import sys


def main(out: str, argv: list[str]) -> None:
    from lerobot.scripts import lerobot_train

    from dl.lerobot.session import run

    record = {"indices": [], "dataset_index": [], "losses": []}
    original_cycle, original_update = lerobot_train.cycle, lerobot_train.update_policy

    def cycle(loader):
        for batch in original_cycle(loader):
            record["indices"].append(batch["index"].reshape(-1).tolist())
            if "dataset_index" in batch:
                record["dataset_index"].append(batch["dataset_index"].reshape(-1).tolist())
            yield batch

    def update_policy(*args, **kwargs):
        metrics, output = original_update(*args, **kwargs)
        record["losses"].append(float(metrics.loss.val))
        return metrics, output

    lerobot_train.cycle, lerobot_train.update_policy = cycle, update_policy
    run(argv)
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    path = out if rank == 0 else out.replace(".json", f".rank{rank}.json")
    with open(path, "w") as f:
        json.dump({**record, "rank": rank, "world_size": world}, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
