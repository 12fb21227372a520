#!/usr/bin/env bash
# Install dl as a user does and run its commands from outside the checkout:
#   1. build the sdist, then the wheel from it (PEP 517, isolated), and check that every module under core/,
#      plugins/ and cli/ is in both;
#   2. install the wheel with no extras into a fresh venv (torch/torchcodec pinned as in scripts/setup.sh);
#   3. from an empty folder: dl --help, dl plugins, a short dl run on the embedded default dataset, dl transcode of a
#      tiny synthetic dataset, dl validate of a synthetic dataset with a PNG image feature, and dl report --plot and
#      dl train, which must each fail in one line saying what to install (the `plot` and `lerobot` extras).
# Usage: scripts/check_wheel.sh [WORK_DIR]   (default: a fresh temporary folder, removed at the end)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d)}
[ -n "${1:-}" ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
say() { printf 'check_wheel: %s\n' "$*"; }
fail() { printf 'check_wheel: FAILED: %s\n' "$*" >&2; exit 1; }
pip() { "$@" --disable-pip-version-check -q 2> >(grep -v "^WARNING: Location" >&2); }

say "building the sdist, and the wheel from it"
# from a copy of the files git tracks or would track: a build's leftovers (dl.egg-info, build/) can put modules into
# the wheel that its package list leaves out
rm -rf "$work/dist" "$work/tree" && mkdir -p "$work/tree"
(cd "$repo" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$work/tree")
"$repo/.venv/bin/python" -m build -q --outdir "$work/dist" "$work/tree" >/dev/null
wheel=$(ls "$work"/dist/dl-*.whl) sdist=$(ls "$work"/dist/dl-*.tar.gz)

say "every module under core/, plugins/ and cli/ is in the wheel and the sdist"
expected=$(cd "$work/tree" && { find core -name '*.py' | sed 's#^core/#dl/#'; find plugins -name '*.py' | sed 's#^#dl/#';
                           find cli -name '*.py' | sed 's#^#dl/#'; } | sort)
in_wheel=$(unzip -Z1 "$wheel" | grep '\.py$' | sort)
missing=$(comm -23 <(echo "$expected") <(echo "$in_wheel"))
[ -z "$missing" ] || fail "the wheel lacks: $(echo $missing)"
in_sdist=$(tar -tzf "$sdist" | sed 's#^[^/]*/##' | grep -E '^(core|plugins|cli)/.*\.py$' | sort)
missing=$(comm -23 <(cd "$work/tree" && find core plugins cli -name '*.py' | sort) <(echo "$in_sdist"))
[ -z "$missing" ] || fail "the sdist lacks: $(echo $missing)"

say "a fresh venv with the wheel and no extras"
python3 -m venv "$work/venv"
pip "$work/venv/bin/python" -m pip install "${DL_TORCH:-torch==2.13.0}" "${DL_TORCHCODEC:-torchcodec==0.13.0}" "$wheel"
dl=$work/venv/bin/dl
mkdir -p "$work/outside" && cd "$work/outside"
export DL_CACHE_DIR=$work/cache

run() { say "$*"; "$@" > "$work/out.txt" 2>&1 || { cat "$work/out.txt"; fail "$*"; }; }
run "$dl" --help
run "$dl" plugins
run "$dl" run --duration 1 --warmup-batches 1 --warmup-s 0 --single-proc-s 0.5 --single-proc-samples 8 \
    --ceiling-s 0 --num-workers 0 --out-dir "$work/results"
run "$dl" synthetic-dataset "$work/tiny" --episodes 2 --frames 8 --cameras 1 --codec h264 --episodes-per-file 2
run "$dl" transcode "$work/tiny" "$work/tiny-hevc" --codec hevc
run "$work/venv/bin/python" -c "
from dl.testing.synthetic import SyntheticConfig, write_synthetic_dataset
write_synthetic_dataset('$work/png', SyntheticConfig(episodes=2, frames_per_episode=(6, 6), cameras=2,
                        image_cameras=(1,), image_format='png', codec='h264', episodes_per_file=2))"
run "$dl" validate "$work/png"

say "dl report --plot without matplotlib says what to install"
if "$dl" report "$work/results" --plot > "$work/out.txt" 2>&1; then cat "$work/out.txt"; fail "dl report --plot worked"; fi
grep -q "Traceback" "$work/out.txt" && { cat "$work/out.txt"; fail "dl report --plot printed a traceback"; }
grep -q "pip install .matplotlib" "$work/out.txt" ||
  { cat "$work/out.txt"; fail "dl report --plot does not say what to install"; }
say "$(grep -m1 -i "error" "$work/out.txt")"

say "dl train without LeRobot names the extra to install"
if "$dl" train --dataset.repo_id=x > "$work/out.txt" 2>&1; then cat "$work/out.txt"; fail "dl train worked"; fi
grep -q "Traceback" "$work/out.txt" && { cat "$work/out.txt"; fail "dl train printed a traceback"; }
grep -q "pip install 'dl\[lerobot\]'" "$work/out.txt" ||
  { cat "$work/out.txt"; fail "dl train does not say what to install"; }
say "passed"
