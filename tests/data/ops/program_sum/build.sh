#!/bin/sh
# The build step: writes the config's "binary" into its build folder.
echo "building X=$TUNEFARM_PARAM_X Y=$TUNEFARM_PARAM_Y ($TUNEFARM_DTYPE) into $TUNEFARM_BUILD_DIR"
echo "X=$TUNEFARM_PARAM_X Y=$TUNEFARM_PARAM_Y" > "$TUNEFARM_BUILD_DIR/kernel.txt"
