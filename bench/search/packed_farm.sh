# Sourced by the search job scripts, with the script's shape arguments: the
# packed farm ($ART, default .art/tunefarm; scripts/pack.sh) as $A and its
# binary as $TF, its libraries on the loader's path, and the shapes as
# --shape flags in "${shapes[@]}".
A=${ART:-.art/tunefarm}
TF=$A/bin/tunefarm
export LD_LIBRARY_PATH=$A/lib:/usr/local/cuda/lib64
shapes=()
for s in "$@"; do shapes+=(--shape "$s"); done
