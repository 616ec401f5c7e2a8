#!/bin/bash
# The properties suite's pretraining of sinusoidal seed 0 (its settings, one thread) at other sinusoid
# amplitudes; from the repository root, after the suite's corpus step has written out/experiments/properties.
# With input_scale=0.028284271247461905 it reproduces the suite's own run of 2026-11-28.
set -e
mkdir -p out/scale-check
for scale in 0.28284271247461906 1.0; do
  d=out/scale-check/pretrain-scale-$scale
  resume=""; [ -d $d ] && resume="--resume"
  OPENBLAS_CORETYPE=SkylakeX build/bin/posenc train --task mlm --data out/experiments/properties/corpus \
    --encoding sinusoidal --out $d $resume --layers 2 --dim 64 --heads 4 --seq-len 128 --batch 32 --steps 6000 \
    --lr 0.003 --warmup 300 --weight-decay 0.01 --clip 1 --seed 0 --threads 1 --checkpoint-every 500 \
    --log-every 100 --max-positions 128 --vocab-size 8000 --encoding-setting input_scale=$scale
done
