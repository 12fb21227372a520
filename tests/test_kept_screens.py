"""dl.format.kept_screens: the map loader's selection screen is kept in dl's cache folder and read by a later open of
the same rows, metadata and videos; a changed video file (or task table) gives another key, and the screen runs
again. A kept screen can only make the loader check episodes again, never skip a refusal the rows call for."""

import os
import shutil

import numpy as np
import pytest

import dl
from dl.contracts.errors import TimestampToleranceError
from dl.testing.synthetic import camera_key

DRIFT = {"episodes": 4, "frames_per_episode": (40, 50), "cameras": 1, "width": 64, "height": 64, "codec": "h264",
         "episodes_per_file": 2, "gop": 4, "fps": 10, "recorded_timestamps": (0.0, 0.08, 0.0)}
"""Timestamps 8% slow against one frame per row: refused at the default tolerance."""


def screens(tmp_path):
    return sorted((tmp_path / "dl-cache" / "screens").glob("*.npz"))


@pytest.fixture
def drifting(dataset_factory, tmp_path):
    root = tmp_path / "ds"
    shutil.copytree(dataset_factory(**DRIFT), root)
    return root


def test_a_kept_screen_is_read_by_the_next_open_and_run_again_when_a_video_changes(drifting, tmp_path):
    with pytest.raises(TimestampToleranceError) as first:
        dl.make_dataset(str(drifting), loader="map")
    [kept] = screens(tmp_path)
    with np.load(kept) as found:
        assert found["gaps"].max() > 0.1 and len(found["gaps"]) == 4
        arrays = {name: found[name] for name in found.files}
    with pytest.raises(TimestampToleranceError) as again:  # the kept screen gives the same refusal
        dl.make_dataset(str(drifting), loader="map")
    assert str(again.value) == str(first.value)
    arrays["gaps"] = np.zeros_like(arrays["gaps"])  # a kept screen saying "no gap" is what the next open reads
    with open(kept, "wb") as out:
        np.savez(out, **arrays)
    assert len(dl.make_dataset(str(drifting), loader="map")) > 0
    video = drifting / "videos" / camera_key(0) / "chunk-000" / "file-000.mp4"
    os.utime(video, ns=(video.stat().st_atime_ns, video.stat().st_mtime_ns + 10**9))  # the video changes
    with pytest.raises(TimestampToleranceError) as changed:
        dl.make_dataset(str(drifting), loader="map")
    assert str(changed.value) == str(first.value) and len(screens(tmp_path)) == 2
