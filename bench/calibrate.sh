# shellcheck shell=bash
# Sourced by the bench scripts that predict (predict_check.sh,
# tta_check.sh). Each measurement they predict from is taken 3 times and
# the median one kept, by what `predict` reads from it:
# - `calibrate NAME FLAGS...` traces 3 `$dlscale train FLAGS...` runs (one
#   worker, or independent workers for a busy calibration) in the current
#   directory as NAME.<i>.json and NAME.<i>.trace.json, replacing any
#   earlier ones, and keeps as NAME.json and NAME.trace.json the median run
#   by its step: the sum of its breakdown's per-phase medians (data,
#   forward, backward, optimizer).
# - `commbench_median NAME FLAGS...` does the same with 3 `$dlscale
#   commbench FLAGS...` runs, by their allreduce fit's bandwidth.
# With --add first, either keeps NAME's earlier runs and adds 3: called
# again after a sweep, it keeps the median of all 6, so the measurement
# brackets the runs it predicts.
# On a shared machine a single run can land in a slow moment
# (bench/README.md, "Predicted against measured, re-run"), and a busy
# record's samples/s (its wall time) can move by a quarter while its
# breakdown, what predict uses, does not ("Calibrating by what predict
# reads"). The sourcing script sets $dlscale.
# shellcheck disable=SC2154

# next_runs [--add] NAME: the first of NAME's 3 new run numbers; without
# --add, NAME's earlier runs are removed first.
next_runs() {
  local first=1 i
  if [ "$1" = --add ]; then
    shift
    while [ -e "$1.$first.json" ]; do first=$((first + 1)); done
  fi
  i=$first
  while [ -e "$1.$i.json" ]; do rm -f "$1.$i.json" "$1.$i.trace.json"; i=$((i + 1)); done
  echo "$first"
}

# keep_median NAME step|allreduce: copies NAME's median run (and its trace,
# if any) to NAME.json and prints what each run measured to stderr.
keep_median() {
  local i
  i=$(/usr/bin/python3 - "$1" "$2" <<'EOF'
import glob, json, re, sys
name, measure = sys.argv[1], sys.argv[2]
runs = []
for path in glob.glob(glob.escape(name) + ".*.json"):
    m = re.fullmatch(re.escape(name) + r"\.(\d+)\.json", path)
    if not m:
        continue
    r = json.load(open(path))["results"]
    if measure == "step":
        b = r["breakdown_ms"]
        value = sum(b[p] for p in ("data", "forward", "backward", "optimizer"))
        also = f"{r['samples_per_sec']:.1f}"
    else:
        value = r["fits"]["allreduce"]["bandwidth_gbps"]
        also = f"{r['fits']['allreduce']['alpha_us']:.0f}"
    runs.append((value, int(m.group(1)), also))
runs.sort()
keep = runs[(len(runs) - 1) // 2]
values = ", ".join(f"{v:.{1 if measure == 'step' else 3}f}" for v, _, _ in runs)
alsos = ", ".join(a for _, _, a in runs)
what = (f"step {values} ms (samples/s {alsos})" if measure == "step"
        else f"allreduce {values} GB/s (alpha {alsos} us)")
print(f"{name}: {what}; run {keep[1]} of {len(runs)} (the median) kept", file=sys.stderr)
print(keep[1])
EOF
  ) || return 1
  cp "$1.$i.json" "$1.json"
  if [ -e "$1.$i.trace.json" ]; then cp "$1.$i.trace.json" "$1.trace.json"; fi
}

# median_runs train|commbench [--add] NAME FLAGS...: 3 runs of
# `$dlscale train|commbench FLAGS...` (train's traced), then keep_median.
median_runs() {
  local kind=$1 add=() first i trace=()
  shift
  if [ "$1" = --add ]; then add=(--add); shift; fi
  local name=$1
  shift
  first=$(next_runs "${add[@]}" "$name")
  for i in $(seq "$first" $((first + 2))); do
    if [ "$kind" = train ]; then trace=(--trace "$name.$i.trace.json"); fi
    "$dlscale" "$kind" "$@" "${trace[@]}" --json "$name.$i.json" > /dev/null
  done
  if [ "$kind" = train ]; then keep_median "$name" step; else keep_median "$name" allreduce; fi
}
calibrate() { median_runs train "$@"; }            # [--add] NAME, then train's flags
commbench_median() { median_runs commbench "$@"; }  # [--add] NAME, then commbench's flags
