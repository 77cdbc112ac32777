#!/usr/bin/env bash
# Checks the dependency direction by what the code includes, which the link graph alone cannot
# catch in static libraries: losses/ and data/ include nothing from trainer/, experiments/ or cli/;
# trainer/ nothing from experiments/ or cli/; experiments/ nothing from cli/. Also checks that only
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
forbid data trainer experiments cli
forbid trainer experiments cli
forbid experiments cli

# Version knowledge lives in one header.
while IFS= read -r hit; do
  echo "compat: $hit  (only trainer/torch_compat.h may test LibTorch versions)"
  status=1
done < <(grep -rnE "TORCH_VERSION_(MAJOR|MINOR)|<torch/mps\.h>|autocast::(is_|set_|get_)" \
           trainer losses data experiments cli --include='*.h' --include='*.cpp' --include='*.cu' 2>/dev/null \
           | grep -v '^trainer/torch_compat\.h:' || true)
exit $status
