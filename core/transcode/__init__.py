"""dl.transcode: `dl transcode`, a LeRobot v3.0 dataset rewritten with its videos re-encoded (codec, GOP, quality),
so it decodes fast where it will be trained (H.264 or HEVC where a GPU's NVDEC has no AV1, a short GOP for random
access), everything else copied.

- `options`: what the user asks for (`TranscodeOptions`: codec, GOP, CRF, preset, pixel format, B-frames, the
  PSNR threshold) and the FFmpeg encoder arguments it becomes.
- `ffmpeg`: the FFmpeg and ffprobe command lines (subprocesses, local files only): encode one file with progress,
  a file's frame times and keyframes, the PSNR of one file against another.
- `verify`: a re-encoded file against the data rows: its frame count and each episode's frame times, and the new
  `from_timestamp` / `to_timestamp` they give.
- `state`: the work folder's record of the files done and verified, so an interrupted transcode resumes.
- `writer`: the rest of the dataset: data and meta copied, `meta/episodes` with the new timestamps, `info.json`
  with the new codec (written last: a dataset without it does not look complete), the result checked through dl's
  own reader.
- `run`: the whole transcode: files encoded in parallel FFmpeg processes, verified as they finish, progress,
  Ctrl-C.

May import: `dl.contracts`, `dl.format`, `dl.host`.
"""
