#!/bin/bash
# The colocated parameter server against the ring allreduce on the emulated
# cluster (bench/README.md, "Both directions of a link"): lenet (28x28, b64)
# and resnet18 (32x32, b32) on HOSTS hosts x 1 worker at LINK_MBIT, 1 thread,
# weak scaling; allreduce, ps:1, ps:HOSTS split at 1 MiB, ps:HOSTS
# round-robin and (setup "greedy") ps:HOSTS split at 0.25 MiB and placed
# greedily, alternating, ROUNDS rounds, with the hosts' TCP congestion
# control TCP_CC (cluster up --tcp-cc; default cubic). Prints each run's
# samples/s, then the medians and the ratios to ps:1 and to allreduce. As
# root, from the repository root after a build:
#   sudo bash bench/ps_duplex.sh                 # 2 hosts, 100 Mbit/s, 3 rounds: about 8 minutes
#   sudo HOSTS=4 SETUPS="ar split" bash bench/ps_duplex.sh
#   sudo HOSTS=4 SETUPS="ar greedy split" ROUNDS=5 bash bench/ps_duplex.sh
#   sudo TCP_CC=bbr HOSTS=4 SETUPS="ar greedy" bash bench/ps_duplex.sh
set -euo pipefail
cd "$(dirname "$0")/.."
dlscale=${DLSCALE:-build/dlscale}
hosts=${HOSTS:-2} link=${LINK_MBIT:-100} rounds=${ROUNDS:-3} cc=${TCP_CC:-cubic}
setups=${SETUPS:-ar ps1 split rr}
models=${MODELS:-lenet resnet18}
name=psdup
"$dlscale" cluster up --name $name --hosts "$hosts" --link-mbit "$link" --tcp-cc "$cc" > /dev/null
trap '"$dlscale" cluster down --name '$name' > /dev/null 2>&1 || true' EXIT
flags() {
  case $1 in
    ar) echo "--strategy allreduce" ;;
    ps1) echo "--strategy ps --ps-shards 1" ;;
    split) echo "--strategy ps --ps-shards $hosts --ps-partition-mb 1" ;;
    rr) echo "--strategy ps --ps-shards $hosts" ;;
    greedy) echo "--strategy ps --ps-shards $hosts --ps-partition-mb 0.25 --ps-assign greedy" ;;
    *) echo "ps_duplex.sh: unknown setup '$1' (ar ps1 split rr greedy)" >&2; exit 2 ;;
  esac
}
for s in $setups; do flags "$s" > /dev/null || exit 2; done  # before any run: $(flags) cannot stop the script
results=$(mktemp)
for round in $(seq "$rounds"); do
  for m in $models; do
    if [ "$m" = lenet ]; then size="--image-size 28 --batch 64 --steps 8 --warmup 2"
    else size="--image-size 32 --batch 32 --steps 6 --warmup 2"; fi
    for s in $setups; do
      # shellcheck disable=SC2046
      v=$("$dlscale" train --cluster $name -m "$m" $size --threads 1 --display-every 0 $(flags "$s") 2>&1 |
          awk '/^total samples\/s/{print $3}')
      [ -n "$v" ] || { echo "ps_duplex.sh: $m $s failed" >&2; exit 1; }
      echo "round $round $m $s $v samples/s" >&2
      echo "$m $s $v" >> "$results"
    done
  done
done
echo "$hosts hosts at $link Mbit/s, TCP $cc, median of $rounds rounds (samples/s; ratios of the medians)"
for m in $models; do
  for s in $setups; do
    med=$(awk -v m="$m" -v s="$s" '$1==m && $2==s {print $3}' "$results" | sort -g |
          awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}')
    echo "$m $s $med"
  done
done | awk '{med[$1" "$2]=$3; rows[NR]=$0} END {
  for (i=1;i<=NR;i++) { split(rows[i],f," "); line=sprintf("%-9s %-6s %9.2f", f[1], f[2], f[3]);
    if ((f[1]" ps1") in med) line=line sprintf("  / ps:1 %.2f", f[3]/med[f[1]" ps1"]);
    if ((f[1]" ar") in med) line=line sprintf("  / allreduce %.2f", f[3]/med[f[1]" ar"]);
    print line } }'
rm -f "$results"
