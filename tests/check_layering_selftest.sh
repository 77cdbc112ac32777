#!/usr/bin/env bash
# Runs check_layering.sh on a fixture tree with five known violations and expects each reported.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=$("$here/check_layering.sh" "$here/data/layering_violation")
rc=$?
fail=0
[ $rc -eq 1 ] || { echo "expected exit 1, got $rc"; fail=1; }
for want in "losses/bad.h:1:" "(losses/ must not include trainer/)" "trainer/bad.cpp:1:" \
            "(trainer/ must not include cli/)" "compat: data/bad.cpp:1:" \
            "trainer/sweep/bad.cpp:1:" "(trainer/sweep/ may include only trainer/{config|serialization|plot|sweep}/ of trainer/)" \
            "trainer/config/bad.h:1:" "(trainer/config/ needs no LibTorch)"; do
  grep -qF -- "$want" <<<"$out" || { echo "missing report: $want"; fail=1; }
done
[ "$(wc -l <<<"$out")" -eq 5 ] || { echo "expected 5 reports, got:"; echo "$out"; fail=1; }
[ $fail -eq 0 ] && echo "check_layering found all 5 planted violations"
exit $fail
