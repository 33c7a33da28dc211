#pragma once
// Helpers built on any Communicator: variable-length byte exchange and the
// start-of-run check that every rank was given the same configuration.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "libtorch/comm/communicator.h"

namespace dlscale::comm {

/// Every rank contributes a string of any length; returns all, in rank order.
std::vector<std::string> allgather_strings(Communicator& comm, const std::string& mine);

/// Throws dlscale::Error on every rank when any rank's `fields` differ from
/// rank 0's, naming the first differing rank, field and both values.
void check_same_config(Communicator& comm, const nlohmann::json& fields);

}  // namespace dlscale::comm
