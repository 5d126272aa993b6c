#!/bin/bash
# The BLR grid of exp_blr.py on the device machine: full batch, then batch 32; outputs to $OUT.
export PYTHONUNBUFFERED=1 JAX_DEFAULT_MATMUL_PRECISION=highest
D=benchmarks/right_by_default
nvidia-smi -L
python3 $D/exp_blr.py --data $D/data/australian --batch 0 --json $OUT/blr_full.json 2>&1 | tee $OUT/blr_full.txt
python3 $D/exp_blr.py --data $D/data/australian --batch 32 --json $OUT/blr_b32.json 2>&1 | tee $OUT/blr_b32.txt
