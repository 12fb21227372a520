"""The work record of a transcode in progress, `DST/.dl-transcode/state.json`: which source and encoding it is
for, and every video file already re-encoded and verified (its size, frames, PSNR and the new episode spans), so a
run that was interrupted continues where it stopped and keeps those files. The record is rewritten atomically
after each file; a file on disk that the record does not list is not trusted and is encoded again."""

import json
import os
from pathlib import Path

from .ffmpeg import TranscodeError

WORK = ".dl-transcode"
"""The work folder inside the destination: the record and, for remote sources, the originals being re-encoded."""
VERSION = 1


class State:
    """`DST/.dl-transcode/state.json`.

    Attributes:
        dst: the destination folder.
        job: the source URL and the encoding (`TranscodeOptions.identity()`).
        files: per re-encoded video path (relative to the root): `{"size", "frames", "gop", "psnr_db",
            "psnr_min_db", "spans": {episode: [from_timestamp, to_timestamp]}}`.
    """

    def __init__(self, dst: Path, job: dict, files: dict[str, dict] | None = None):
        self.dst, self.job, self.files = dst, job, files or {}

    @property
    def path(self) -> Path:
        return self.dst / WORK / "state.json"

    @classmethod
    def open(cls, dst: Path, job: dict) -> "State":
        """The record to work with in `dst`: a new one for an empty or missing folder, the existing one to resume
        when it is for the same job.

        Raises:
            TranscodeError: `dst` holds something else (a dataset, other files, a transcode of another source or
                with other options), naming what and what to do.
        """
        record = dst / WORK / "state.json"
        if record.is_file():
            saved = json.loads(record.read_text())
            if saved.get("job") != job:
                old = saved.get("job", {})
                diffs = "; ".join(f"{k}: {old.get(k)!r} there, {job.get(k)!r} now"
                                  for k in sorted(old.keys() | job.keys()) if old.get(k) != job.get(k))
                raise TranscodeError(f"{dst} holds an interrupted transcode with other settings ({diffs}). Run the "
                                     "same command again to finish it, or choose another destination (or delete "
                                     f"{dst}).")
            return cls(dst, job, saved.get("files", {}))
        if (dst / "meta" / "info.json").is_file():
            raise TranscodeError(f"{dst} already holds a dataset; choose another destination.")
        if dst.exists() and (not dst.is_dir() or any(dst.iterdir())):
            raise TranscodeError(f"{dst} exists and is not an empty folder; choose another destination.")
        state = cls(dst, job)
        state.save()
        return state

    def done(self, rel: str) -> dict | None:
        """The record of video `rel` when it is verified and still on disk at its recorded size, else None."""
        facts = self.files.get(rel)
        target = self.dst / rel
        if facts is None or not target.is_file() or target.stat().st_size != facts["size"]:
            return None
        return facts

    def record(self, rel: str, facts: dict) -> None:
        """Mark video `rel` verified with its facts, on disk at once."""
        self.files[rel] = facts
        self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"version": VERSION, "job": self.job, "files": self.files}, indent=1))
        os.replace(tmp, self.path)
