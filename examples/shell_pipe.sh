#!/usr/bin/env bash
# A shell pipe into the daemon: learn the bundled LIBSVM letter data from stdin, as the
# lines arrive, with checkpoints; then evaluate the checkpoint on the held-out file.
#
#     bash examples/shell_pipe.sh [WORK_DIR]
#
# Run it again with the same WORK_DIR and `--resume` picks up where the checkpoint is:
# stdin is read again from its beginning, and the bytes the checkpoint already covers are
# checked and skipped.
set -euo pipefail
data="$(cd "$(dirname "$0")/.." && pwd)/streamlearn/data"
work="${1:-$(mktemp -d)}"

bzcat "$data/letter.scale.bz2" "$data/letter.scale.bz2" "$data/letter.scale.bz2" \
  | streamlearn train - --learner MulticlassSVM --param lam=1e-4 --param average=True \
      --checkpoint-dir "$work/checkpoints" --checkpoint-every 5000 --resume --quiet

streamlearn evaluate "$data/letter.scale.t.bz2" --checkpoint "$work/checkpoints"
streamlearn plot "$work/checkpoints/metrics.jsonl" -o "$work/learning_curves.png"
