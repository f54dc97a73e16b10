#!/usr/bin/env bash
# Every GPU measurement and CUDA test of issue 48, in order, in ONE call on a lent GPU machine.
#
#   on the GPU (the device tool's run, after `bash benchmarks/gpu_prepare.sh` here):
#       bash benchmarks/gpu_all.sh "$OUT"
#   dry run here, on the CPU at tiny sizes (every step must pass):
#       TINY=1 bash benchmarks/gpu_all.sh /tmp/gpu_dry
#   a rerun of some steps only (names as in steps.tsv):
#       STEPS="gpu_process chat_vqa" bash benchmarks/gpu_all.sh "$OUT"
#
# Each step runs under its own time limit (a hung step cannot eat the device budget), appends
# its output to all.log, writes its JSON as soon as it has it, and records "step rc seconds" in
# steps.tsv; a failed step does not stop the next. At most 8 files are written into OUTDIR (the
# device tool brings back 8): env.json, steps.tsv, all.log, cuda_tests.xml, gpu_scoring.json,
# gpu_process.json, chat_vqa.json (the benchmarks rewrite their JSON after every row, so a step
# stopped at its limit keeps what it measured). Step limits add up to 480 s on the GPU: with the
# machine's start (1-2 min) this leaves about 3 of the 15 device minutes for a rerun of the steps
# that failed (STEPS=...; docs/performance.md).
# No multiprocessing pool is forked after CUDA starts: the decode ceiling uses spawn
# (benchmarks/gpu_scoring.py) and the engine's workers are DataLoader workers started before the
# model runs.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-/tmp/gpu_all}}"
mkdir -p "$out"
: >"$out/steps.tsv"
: >"$out/all.log"
py="${PYTHON:-python3}"
if [ -d .gpucarry/site ]; then
    export PYTHONPATH="$PWD/.gpucarry/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export TS2_CACHE_DIR="${TS2_CACHE_DIR:-/tmp/ts2-gpu-cache}" TS2_MODELS_DIR="${TS2_MODELS_DIR:-/tmp/ts2-gpu-models}"

tiny="${TINY:-0}"
if [ "$tiny" = 1 ]; then
    scoring_args=(--n-images 16 --image-size 64)
    process_args=(--n-images 16 --image-size 64 --arch ViT-B-32 --device cpu)
    chat_args=(--images 2 --questions 2)
    limits=(60 300 300 300 300)
else
    scoring_args=()                       # CUDA sizes: 4096 JPEGs of 512 px, ViT-L-14, BLIP VQA-base sized
    process_args=(--n-images 4096 --image-size 512 --arch ViT-L-14 --device cuda)
    chat_args=()                          # CUDA: LLaVA-1.5-7b sized, fp16, 64 images x 8 questions
    limits=(20 60 200 100 100)
fi

steps="${STEPS:-env cuda_tests gpu_scoring gpu_process chat_vqa}"

step() {  # step NAME LIMIT_S COMMAND...
    local name=$1 limit=$2
    shift 2
    case " $steps " in *" $name "*) ;; *) return 0 ;; esac
    local t0=$SECONDS
    echo "=== $name (limit ${limit}s): $*" >>"$out/all.log"
    timeout -k 10 "$limit" "$@" >>"$out/all.log" 2>&1
    local rc=$?
    printf '%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - t0))" >>"$out/steps.tsv"
    echo "gpu_all: $name rc=$rc in $((SECONDS - t0)) s" >&2
}

# 1. The machine: device, driver, versions (first, so every later number has its context).
step env "${limits[0]}" "$py" - "$out/env.json" <<'PY'
import json, platform, subprocess, sys
import torch
info = {"python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(), "platform": platform.platform()}
if torch.cuda.is_available():
    info["device"] = torch.cuda.get_device_name()
    info["capability"] = ".".join(map(str, torch.cuda.get_device_capability()))
    info["memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
    try:
        info["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                        capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        info["driver"] = f"unknown ({e})"
import importlib.metadata as md
for name in ("transformers", "open_clip_torch", "hydra-core", "numpy", "pillow", "sentence-transformers"):
    try:
        info[name] = md.version(name)
    except md.PackageNotFoundError:
        info[name] = None
json.dump(info, open(sys.argv[1], "w"), indent=1)
print(json.dumps(info))
PY

# 2. The CUDA tests (skipped with a reason on a CPU): fp16 within tolerance of fp32, batch-size
#    invariance, pinned uint8 collation, prefix-cache answers equal plain generate.
step cuda_tests "${limits[1]}" "$py" -m pytest -q -p no:cacheprovider -rs -o addopts="" \
    tests/test_engine_pipeline.py tests/test_chat_prefix_cache.py -k "cuda" --junitxml="$out/cuda_tests.xml"

# 3. In-process scoring: ceilings, loop, recipe, engine defaults/fp32/tuned, fp16 deviation, TIFA.
step gpu_scoring "${limits[2]}" "$py" benchmarks/gpu_scoring.py "${scoring_args[@]}" --json "$out/gpu_scoring.json"

# 4. ts2 score as a whole process with its defaults, then fully cached, vs the import floor.
step gpu_process "${limits[3]}" "$py" benchmarks/gpu_process.py "${process_args[@]}" --json "$out/gpu_process.json"

# 5. Chat-VLM VQA: loop vs batches with prefix_cache off/auto, answers equal.
step chat_vqa "${limits[4]}" "$py" benchmarks/chat_vqa_speed.py "${chat_args[@]}" --json "$out/chat_vqa.json"

echo "gpu_all: done; $(awk -F'\t' '$2 != 0' "$out/steps.tsv" | wc -l) step(s) failed (steps.tsv, all.log)" >&2
awk -F'\t' '$2 != 0 {bad = 1} END {exit bad}' "$out/steps.tsv"
