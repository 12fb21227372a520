"""Generated datasets whose videos carry real recordings' frame times (`TIMING_CASES`): episodes concatenated off
the 1/fps grid, a 29.97 fps camera, a variable frame rate, an edit list, B-frames, and wall-clock timestamps
drifting against one frame per row. In every case each row's camera frame was recorded with that row (its index
code is the row's index), so a served frame is right exactly when it is the row's own (`own_frame`); what a
loader serves is compared with that, never with a 1/fps grid."""

from .real_cases import RealCase, _case

TIMING_CASES: dict[str, RealCase] = {
    "concatenated": _case("each episode its own recording whose last frame lasts 3.7 ms longer than 1/fps, joined "
                          "by the concat demuxer with stream copy (LeRobot's concatenate_video_files); "
                          "from_timestamp sums the recordings' stream durations; every recording's movie timescale "
                          "is its track's, so frames sit exactly at from_timestamp, off the file's 1/fps grid",
                          concatenated=True, recording_tail_s=0.0037, movie_timescale=15360),
    "concatenated_ms": _case("as concatenated, with FFmpeg's movie timescale (1000): the concat demuxer places "
                             "each recording at its ms-rounded container duration, up to 0.5 ms per recording "
                             "from the stream durations from_timestamp sums", concatenated=True,
                             recording_tail_s=0.0037),
    "ntsc": _case("a 29.97 fps (30000/1001) camera, info.json fps 30, timestamps frame_index / 30",
                  video_rate="30000/1001"),
    "vfr": _case("a variable-frame-rate file (frames up to 0.3 frame off the grid), timestamps the frames' times; "
                 "40-60 frame episodes, whose timestamps' median spacing stays within 5% of 1/fps",
                 vfr_jitter=0.3, frames_per_episode=(40, 60)),
    "edit_list": _case("every video file cut by stream copy after 3 leading frames: its edit list starts the "
                       "timeline after them", edit_list_frames=3),
    "bframes": _case("H.264 with B-frames (x264's reordering, a 12-frame GOP; composition offsets and an edit list)",
                     gop=12),
    "drift": _case("the issue's arm: 10 fps, wall-clock timestamps 8% slow against a video of one frame per row "
                   "(by an episode's end, a row's timestamp is up to 4.7 frames past its own frame), 40-60 frame "
                   "episodes; the rows' rate is 8% off info.json's fps, the video's is not",
                   fps=10, recorded_timestamps=(0.0, 0.08, 0.0), frames_per_episode=(40, 60)),
}
"""Every frame-time case, by name (issue 50)."""

TIMING_OPTIONS: dict[str, list[dict]] = {
    "concatenated_ms": [{"tolerance_s": 0.002}],
    "ntsc": [{"tolerance_s": 0.001}],
    "drift": [{"tolerance_s": 0.05}, {"tolerance_s": 0.05, "frame_pairing": "row"}],
}
"""Further settings each case is read with besides LeRobot's defaults: a raised `tolerance_s` (under half a frame
where that serves the rows' own frames; half a frame, as the issue's drifting arm was read, where only that makes
LeRobot serve), and the row pairing."""


def own_frame(index: int) -> int:
    """The index code of the frame recorded with row `index` (its own)."""
    return index
