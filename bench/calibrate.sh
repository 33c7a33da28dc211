# shellcheck shell=bash
# Sourced by the bench scripts that predict (predict_check.sh,
# tta_check.sh): `calibrate NAME FLAGS...` traces 3 `$dlscale train
# FLAGS...` runs (one worker, or independent workers for a busy
# calibration) in the current directory and keeps the median one (by
# samples/s) as NAME.json and NAME.trace.json.
# On a shared machine a single run can land in a slow moment
# (bench/README.md, "Predicted against measured, re-run"). The sourcing
# script sets $dlscale.
# shellcheck disable=SC2154
calibrate() {  # NAME, then train's flags
  local name=$1 i rates=()
  shift
  for i in 1 2 3; do
    "$dlscale" train "$@" --trace "$name.$i.trace.json" --json "$name.$i.json" > /dev/null
    rates+=("$(python3 -c 'import json, sys; print(round(json.load(open(sys.argv[1]))["results"]["samples_per_sec"], 1))' \
      "$name.$i.json") $i")
  done
  local sorted
  sorted=$(printf '%s\n' "${rates[@]}" | sort -g)
  i=$(echo "$sorted" | sed -n 2p | cut -d' ' -f2)
  cp "$name.$i.json" "$name.json"
  cp "$name.$i.trace.json" "$name.trace.json"
  echo "$name: $(echo "$sorted" | cut -d' ' -f1 | tr '\n' ' ')samples/s; run $i (the median) kept" >&2
}
