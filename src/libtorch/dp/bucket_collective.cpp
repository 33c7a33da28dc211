#include "libtorch/dp/bucket_collective.h"

#include <deque>

#include "core/error.h"
#include "core/text.h"
#include "libtorch/dp/allreduce_collective.h"
#include "libtorch/dp/hierarchical_collective.h"
#include "libtorch/dp/tree_collective.h"

namespace dlscale::dp {

namespace {

/// A bucket collective's factory by its word (the word is the bucketed
/// strategy's, dp/sync_options.cpp).
struct CollectiveEntry {
  std::string name;
  CollectiveFactory make;
};

std::deque<CollectiveEntry>& collective_table() {
  static std::deque<CollectiveEntry> collectives{
      {"allreduce", [](comm::Communicator& comm, int,
                       const std::string&) { return make_allreduce_collective(comm); }},
      {"tree",
       [](comm::Communicator& comm, int, const std::string&) -> std::unique_ptr<BucketCollective> {
         return std::make_unique<TreeCollective>(comm);
       }},
      {"hierarchical", make_hierarchical_collective}};
  return collectives;
}

}  // namespace

void register_bucket_collective(const std::string& name, CollectiveFactory make) {
  DLSCALE_CHECK(!name.empty() && make != nullptr, "a bucket collective needs a name and a factory");
  for (const CollectiveEntry& e : collective_table()) {
    DLSCALE_CHECK(e.name != name, "bucket collective '{}' is taken", name);
  }
  collective_table().push_back({name, std::move(make)});
}

std::unique_ptr<BucketCollective> make_bucket_collective(const std::string& strategy,
                                                         comm::Communicator& comm,
                                                         int ranks_per_node,
                                                         const std::string& node_name) {
  std::vector<std::string> names;
  for (const CollectiveEntry& e : collective_table()) {
    if (e.name == strategy) return e.make(comm, ranks_per_node, node_name);
    names.push_back(e.name);
  }
  throw Error(fmt::format("unknown collective '{}'; allowed: {}", strategy, join(names, ", ")));
}

}  // namespace dlscale::dp
