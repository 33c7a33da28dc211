#pragma once
// Slurm's host lists ("n[1-3,7],m05", "rack[1-2]-n[01-04]"), as Slurm writes
// them in SLURM_JOB_NODELIST and SLURM_STEP_NODELIST and as `scontrol show
// hostnames` expands them: our own parser, no libslurm.
#include <string>
#include <vector>

namespace dlscale::slurm {

/// The most host names one list may expand to (a typo such as n[1-9999999]
/// is refused rather than allocated).
inline constexpr std::size_t kMaxHostlistHosts = 1 << 20;

/// Every host name of `list`, in Slurm's order: entries separated by commas
/// (or spaces) outside brackets; each bracket holds comma-separated numbers
/// and ranges (lo-hi, lo <= hi) expanded in order, zero-padded to the width
/// of lo when lo has a leading zero (n[08-10] gives n08 n09 n10); several
/// brackets in one entry give every combination, the last varying fastest.
/// Throws dlscale::Error naming the list and what is wrong (an unbalanced
/// bracket, an empty entry or range, a range whose end is below its start,
/// more than kMaxHostlistHosts names).
std::vector<std::string> expand_hostlist(const std::string& list);

/// The first host of `list` without expanding the rest: the step's first
/// node, where rank 0 runs. Throws like expand_hostlist.
std::string first_host(const std::string& list);

}  // namespace dlscale::slurm
