#!/bin/bash
# The BLR grid of exp_blr.py on the device machine: full batch, then batch 32; outputs to $OUT.
# Extra arguments (e.g. --lag) go to both runs; TAG names the output files. ../shared does not
# travel: first `mkdir -p benchmarks/right_by_default/data && cp ../shared/data/libsvm_australian/australian
# benchmarks/right_by_default/data/` (untracked, so it travels; remove it afterwards).
export PYTHONUNBUFFERED=1 JAX_DEFAULT_MATMUL_PRECISION=highest
D=benchmarks/right_by_default
T=${TAG:-blr}
nvidia-smi -L
python3 $D/exp_blr.py --data $D/data/australian --batch 0 --json $OUT/${T}_full.json "$@" 2>&1 | tee $OUT/${T}_full.txt
python3 $D/exp_blr.py --data $D/data/australian --batch 32 --json $OUT/${T}_b32.json "$@" 2>&1 | tee $OUT/${T}_b32.txt
