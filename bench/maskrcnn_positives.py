#!/usr/bin/env python3
"""The positive RoIs per image a maskrcnn run's mask head ran on, from the
stderr of `DLSCALE_LOG_LEVEL=debug dlscale train --model maskrcnn ...`
(one line per image and step, tagged with its rank): the mean over the
measured steps, each rank's first `skip` lines (its warm-up's images) left
out. bench/families_bench.sh and families_ddp_bench.sh print it beside the
peer's own count (bench/peer_train.py's positive_rois_per_image), so that a
reader sees both sides ran their mask heads on as many RoIs.

    python3 bench/maskrcnn_positives.py STDERR_FILE SKIP
"""
import re
import sys

LINE = re.compile(r"\[rank (\d+)/\d+\] maskrcnn: image \d+: \d+ proposals, \d+ RoIs sampled, (\d+) positive")


def mean_positives(path, skip):
    """None when the file has no such line after the skipped ones."""
    by_rank = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = LINE.search(line)
            if m:
                by_rank.setdefault(m.group(1), []).append(int(m.group(2)))
    kept = [n for counts in by_rank.values() for n in counts[skip:]]
    return sum(kept) / len(kept) if kept else None


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        sys.exit(2)
    print(mean_positives(sys.argv[1], int(sys.argv[2])))
