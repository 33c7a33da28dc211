#pragma once
// How a parameter server hands variables to shards (--ps-assign): an enum of
// its own, so the shard plan (dp/ps_plan.h, in the core library) needs
// nothing of the options layer that names it (dp/sync_options.h).
namespace dlscale::dp {

enum class PsAssign { kRoundRobin, kGreedy };

}  // namespace dlscale::dp
