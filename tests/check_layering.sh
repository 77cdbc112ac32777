#!/usr/bin/env bash
# Checks the dependency direction by what the code includes, which the link graph alone cannot
# catch in static libraries: losses/ and data/ include nothing from trainer/, experiments/ or cli/
# (losses/ may include data/, for its FFT; data/ nothing from losses/);
# trainer/ nothing from experiments/ or cli/; experiments/ nothing from cli/. Inside trainer/, the
# subfolder targets point one way too: sweep/ -> config/, serialization/, plot/; config/ and plot/
# stand alone and, like sweep/, include no LibTorch. Also checks that only
# trainer/torch_compat.h tests LibTorch's version or includes version-specific headers.
#
# usage: tests/check_layering.sh [SOURCE_ROOT]   (exit 1 and one line per violation)
set -u
root=${1:-$(dirname "$0")/..}
cd "$root" || exit 2
status=0

forbid() {  # $1 folder, $2.. folders it must not include from
  local folder=$1; shift
  [ -d "$folder" ] || return 0
  for dep in "$@"; do
    while IFS= read -r hit; do
      echo "layering: $hit  ($folder/ must not include $dep/)"
      status=1
    done < <(grep -rnE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"]$dep/" "$folder" \
               --include='*.h' --include='*.hpp' --include='*.cpp' --include='*.cu' --include='*.cuh' || true)
  done
}
forbid losses trainer experiments cli
forbid data trainer experiments cli losses
forbid trainer experiments cli
forbid experiments cli

# Inside trainer/: each subfolder is a target of its own. What it may include of trainer/ (a regex of
# the allowed folders), and whether LibTorch is off limits (the config engine, the plots and the
# sweep code run no model).
within() {  # $1 folder, $2 allowed trainer/ subfolders (regex), $3 "no-torch" or ""
  local folder=$1 allowed=$2 torch=$3
  [ -d "$folder" ] || return 0
  while IFS= read -r hit; do
    echo "layering: $hit  ($folder/ may include only trainer/{$allowed}/ of trainer/)"
    status=1
  done < <(grep -rnE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"]trainer/" "$folder" --include='*.h' --include='*.cpp' \
             | grep -vE "[<\"]trainer/($allowed)/" || true)
  [ "$torch" = no-torch ] || return 0
  while IFS= read -r hit; do
    echo "layering: $hit  ($folder/ needs no LibTorch)"
    status=1
  done < <(grep -rnE "^[[:space:]]*#[[:space:]]*include[[:space:]]*<(torch|ATen|c10)/" "$folder" --include='*.h' --include='*.cpp' || true)
}
within trainer/config config no-torch
within trainer/plot plot no-torch
within trainer/serialization serialization ""
within trainer/sweep "config|serialization|plot|sweep" no-torch

# Version knowledge lives in one header.
while IFS= read -r hit; do
  echo "compat: $hit  (only trainer/torch_compat.h may test LibTorch versions)"
  status=1
done < <(grep -rnE "TORCH_VERSION_(MAJOR|MINOR)|<torch/mps\.h>|autocast::(is_|set_|get_)" \
           trainer losses data experiments cli --include='*.h' --include='*.cpp' --include='*.cu' 2>/dev/null \
           | grep -v '^trainer/torch_compat\.h:' || true)
exit $status
