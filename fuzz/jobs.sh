# Sourced by fuzz/build.sh and fuzz/run.sh: commands in the background,
# FUZZ_JOBS (default: the cores) at a time.
jobs_max=${FUZZ_JOBS:-$(nproc)}
jobs_running=0
jobs_failed=0

# job_start CMD...: runs CMD in the background once fewer than jobs_max run.
job_start() {
  if [ "$jobs_running" -ge "$jobs_max" ]; then
    wait -n || jobs_failed=1
    jobs_running=$((jobs_running - 1))
  fi
  "$@" &
  jobs_running=$((jobs_running + 1))
}

# jobs_wait: waits for every job started; fails when one of them failed.
jobs_wait() {
  while [ "$jobs_running" -gt 0 ]; do
    wait -n || jobs_failed=1
    jobs_running=$((jobs_running - 1))
  done
  return "$jobs_failed"
}
