// The names of the launch options' enums (launch/launch_options.h):
// torch-free, for the front executable (docs/architecture.md, "Two executables").
#include "core/enum_names.h"
#include "launch/launch_options.h"

namespace dlscale::launch {
namespace {

constexpr EnumNames<MpiCollectives, 2> kMpiCollectives{
    "--mpi-collectives",
    {{{MpiCollectives::kBlocking, "blocking"}, {MpiCollectives::kPolled, "polled"}}}};

}  // namespace

const EnumNames<MpiCollectives, 2>& enum_names(MpiCollectives) { return kMpiCollectives; }

}  // namespace dlscale::launch
