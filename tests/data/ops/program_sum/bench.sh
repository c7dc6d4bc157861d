#!/bin/sh
# Prints the program-op protocol for one (config, shape): chatter first,
# then the croq-tune lines or one JSON answer.
. ./lib/cost.sh
echo "timing X=$TUNEFARM_PARAM_X Y=$TUNEFARM_PARAM_Y N=$TUNEFARM_DIM_N on $TUNEFARM_GPU_MODEL"
test -f "$TUNEFARM_BUILD_DIR/kernel.txt" || { echo "no build output" >&2; exit 3; }
us=$(cost "$TUNEFARM_PARAM_X" "$TUNEFARM_PARAM_Y" "$TUNEFARM_DIM_N")
if [ "$TUNEFARM_PARAM_X" = 4 ]; then
  echo "VERIFY: FAIL max_abs_err=0.5"
  exit 0
fi
if [ "$TUNEFARM_PARAM_Y" = 1 ]; then
  # croq-tune's lines: one sample per TFLOPS line.
  echo "VERIFY: PASS max_abs_err=0.0001"
  for i in 1 2 3 4 5; do echo "TFLOPS: 1.0 time_ms: $(echo "$us" | awk '{ printf "%.6f", $1 / 1000 }')"; done
else
  echo "{\"tunefarm\": 1, \"check\": \"pass\", \"max_abs_err\": 0.0001, \"samples_us\": [$us, $us, $us, $us, $us]}"
fi
