"""Broken datasets: the ways real LeRobot v3.0 datasets go wrong (an edited or half-converted meta/episodes,
info.json disagreeing with the data, bad values, damaged files), each as an edit of a generated dataset (the
conftest's small one: 6 episodes, 3 per file, two H.264 cameras). `BROKEN`: LeRobot would serve wrong data or
crash, dl refuses; `WARNED`: LeRobot serves the stored values and so does dl, with a one-line warning. dl's tests
hold the loaders and `dl validate` to them; benchmarks/lerobot_parity.py runs them through LeRobot too."""

import json
import os
import struct
import subprocess

import pyarrow as pa
import pyarrow.parquet as pq

from .synthetic_spec import SyntheticConfig, camera_key

BASE = SyntheticConfig(episodes=6, frames_per_episode=(20, 40), cameras=2, codec="h264", gop=4, episodes_per_file=3,
                       row_group_size=16)
"""The dataset every case edits (dl's tests' `small_dataset`): 6 episodes of 20-40 frames, 3 per file."""

DATA0, DATA1 = "data/chunk-000/file-000.parquet", "data/chunk-000/file-001.parquet"
EPISODES = "meta/episodes/chunk-000/file-000.parquet"
CAM0 = camera_key(0)


def edit_info(root, edit):
    """Rewrite meta/info.json: `edit(info dict)` in place."""
    info = json.loads((root / "meta/info.json").read_text())
    edit(info)
    (root / "meta/info.json").write_text(json.dumps(info, indent=4))


def edit_episode(root, episode, **changes):
    """Add `changes[column]` (a number) to `episode`'s value of each column in meta/episodes."""
    table = pq.read_table(root / EPISODES)
    row = table.column("episode_index").to_pylist().index(episode)
    for column, delta in changes.items():
        column = column.replace("__", "/")
        values = table.column(column).to_pylist()
        values[row] += delta
        i = table.schema.get_field_index(column)
        table = table.set_column(i, table.schema.field(i), pa.array(values, table.schema.field(i).type))
    pq.write_table(table, root / EPISODES)


def edit_data(root, path, column, edit, arrow_type=None):
    """Rewrite one data column: `edit(values as a Python list, table) -> new values`."""
    table = pq.read_table(root / path)
    i = table.schema.get_field_index(column)
    values = edit(table.column(column).to_pylist(), table)
    kind = arrow_type or table.schema.field(i).type
    pq.write_table(table.set_column(i, pa.field(column, kind), pa.array(values, kind)), root / path)


def shift_span(root, episode, key, seconds):
    """Move camera `key`'s span of `episode` (from and to) by `seconds`."""
    edit_episode(root, episode, **{f"videos__{key}__from_timestamp": seconds, f"videos__{key}__to_timestamp": seconds})


def corrupt_payload(root, path):
    """Scramble a quarter of the mp4's `mdat` payload past its first third: the header still opens."""
    data = bytearray((root / path).read_bytes())
    at = data.find(b"mdat")
    size = struct.unpack(">I", data[at - 4:at])[0]
    for k in range(at + 4 + size // 3, at + 4 + size // 3 + size // 4):
        data[k] = (data[k] * 7 + 13) % 256
    (root / path).write_bytes(bytes(data))


def reencode(root, path, size):
    """Re-encode the mp4 at another frame size (`WxH`), frames and timing kept."""
    tmp = root / "tmp.mp4"
    subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-i", str(root / path), "-vf", f"scale={size}",
                    "-c:v", "libx264", "-g", "4", "-y", str(tmp)], check=True)
    os.replace(tmp, root / path)


def nan_state(values, table):
    """Two NaN and one inf in episode 1's observation.state (`edit_data`'s edit)."""
    episode = table.column("episode_index").to_pylist()
    out = [list(v) for v in values]
    first = episode.index(1)
    out[first][0], out[first + 1][2], out[first + 2][1] = float("nan"), float("inf"), float("nan")
    return out


BROKEN = {
    # name: (edit(root), what the error or warning says)
    "span_shifted_half_second": (lambda root: shift_span(root, 1, CAM0, 0.5), "episode 1: camera"),
    "span_shifted_onto_another_episode": (lambda root: shift_span(root, 0, CAM0, 1.0), "episode 0: camera"),
    "last_span_past_the_file_end": (lambda root: shift_span(root, 2, CAM0, 0.5), "needs frames up to"),
    "to_timestamp_shifted": (lambda root: edit_episode(root, 4, **{f"videos__{CAM0}__to_timestamp": 0.5}),
                             "but the episode has"),
    "lossy_dtype": (lambda root: edit_info(root, lambda i: i["features"]["observation.state"].update(dtype="int8")),
                    "int8 (its dtype in meta/info.json) cannot hold"),
    "shape_differs_from_data": (
        lambda root: edit_info(root, lambda i: i["features"]["action"].update(shape=[7])),
        "holds rows of shape [6], but meta/info.json says [7]"),
    "unknown_task_index": (lambda root: edit_data(root, DATA1, "task_index", lambda v, t: [7] * len(v)),
                           "has task_index 7, which meta/tasks.parquet does not list"),
    "text_for_a_float_vector": (
        lambda root: edit_data(root, DATA0, "observation.state", lambda v, t: [[f"x{x}" for x in r] for r in v],
                               pa.list_(pa.string())), "Failed to parse string"),
    "bytes_for_a_float_vector": (
        lambda root: edit_data(root, DATA0, "observation.state", lambda v, t: [str(r).encode() for r in v],
                               pa.binary()), "but meta/info.json says it is numbers (float32)"),
    "corrupt_mp4_payload": (lambda root: corrupt_payload(root, f"videos/{CAM0}/chunk-000/file-001.mp4"),
                            "Invalid data found when processing input"),
    "one_file_of_another_size": (lambda root: reencode(root, f"videos/{CAM0}/chunk-000/file-001.mp4", "64:48"),
                                 "frames are 64x48, but camera"),
}
"""Broken datasets dl refuses: every one makes the loaders fail, and `dl validate` names it."""

WARNED = {
    "nan_and_inf": (lambda root: edit_data(root, DATA0, "observation.state", nan_state),
                    "NaN or inf values in episode(s) 1 (observation.state: 3)"),
    "every_file_of_another_size_than_info_json": (
        lambda root: edit_info(root, lambda i: i["features"][CAM0].update(shape=[48, 64, 3])),
        "frames are 128x96, but meta/info.json's shape for camera"),
    "symlink_loop": (lambda root: os.symlink("..", root / "data" / "chunk-000" / "loop"), "symbolic link loop"),
    "numbers_as_text": (
        lambda root: edit_data(root, DATA0, "observation.state", lambda v, t: [[str(x) for x in r] for r in v],
                               pa.list_(pa.string())), "holds numbers written as text"),
}
"""Datasets LeRobot serves with their stored values: dl serves them too, with a one-line warning."""
