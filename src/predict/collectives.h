#pragma once
// The α–β cost of each collective the strategies use (docs/predict.md has
// every formula and its source): moving b bytes over one link takes
// alpha + b / bandwidth. No LibTorch.
#include <array>
#include <string>

namespace dlscale::predict {

/// One level of the network: a worker's link inside a node, or a node's
/// link to the others.
struct Link {
  double alpha_s = 0;       ///< latency of one message, seconds
  double bytes_per_s = 0;   ///< bandwidth of the link in each direction (full duplex), > 0
  /// One direction while nothing comes the other way (commbench's
  /// sendrecv); 0 = bytes_per_s. Above it only where the CPU is the link
  /// (loopback: one copy at a time instead of two); a rate set anew clears it.
  double one_way_bytes_per_s = 0;
  /// Sets the rate of both directions at once (a shaped or stated link).
  void set_rate(double rate) {
    bytes_per_s = rate;
    one_way_bytes_per_s = 0;
  }
  /// The link as one message at a time in one direction sees it.
  Link one_way() const {
    return {alpha_s, one_way_bytes_per_s > bytes_per_s ? one_way_bytes_per_s : bytes_per_s, 0};
  }
};

/// Which link a transfer crosses, for naming the bottleneck.
enum class LinkKind { kIntra, kInter, kShard, kFabric };
/// "intra-node link", "inter-node link", "ps-shard link", "fabric uplink".
const char* link_name(LinkKind kind);

/// A fabric the nodes share (docs/predict.md, "A shared fabric"): a
/// two-tier tree whose leaf switches each hold `nodes_per_group` nodes
/// (node i in group i / nodes_per_group) and reach the others through one
/// uplink of `bytes_per_s` each way. Without it (nodes_per_group 0) the
/// switch is non-blocking: only each node's own link counts.
struct Fabric {
  long long nodes_per_group = 0;
  double bytes_per_s = 0;  ///< each group's uplink, each way
  /// Whether traffic among `nodes` nodes (0 .. nodes-1) crosses an uplink.
  bool spans(long long nodes) const { return nodes_per_group > 0 && nodes > nodes_per_group; }
};

/// A 16-bit wire type's own rate at each level, bytes/s of its messages
/// (from a float16 or bfloat16 commbench: Gloo sums 16-bit values on a CPU
/// more slowly per byte than float32); 0 = as float32's.
struct WireRate {
  double intra_bytes_per_s = 0;
  double inter_bytes_per_s = 0;
  /// fp32 read rate of a cast to this type and back (each direction moves
  /// the fp32 bytes once); 0 = Network::cast_bytes_per_s.
  double cast_bytes_per_s = 0;
};
/// The wire types with rates of their own: "fp16" (0), "bf16" (1); -1 for
/// "none" (float32) and anything else.
int wire16_index(const std::string& compress);

/// The network a job runs on: two levels and how many workers share a node.
struct Network {
  Link intra;                    ///< between workers of one node (NVLink, PCIe, shared memory)
  Link inter;                    ///< each node's link to the others (its NIC)
  int workers_per_node = 1;      ///< >= 1
  double cast_bytes_per_s = 0;   ///< fp32 read rate of a cast to fp16/bf16; 0 = casts cost nothing
  Fabric fabric;                 ///< above the nodes' links; none by default
  std::array<WireRate, 2> wire16{};  ///< fp16's and bf16's own rates (wire16_index)

  /// The network a bucket sent as `compress` ("none", "fp16", "bf16")
  /// crosses: each level's bandwidth capped by that wire type's own rate
  /// where one was measured.
  Network for_wire(const std::string& compress) const;
  /// The fp32 read rate of a cast to `compress`'s wire type: its own where
  /// one was given, else cast_bytes_per_s; 0 for "none" (float32 is not cast)
  /// and where casts cost nothing.
  double cast_rate(const std::string& compress) const;
  /// One cast rate for every 16-bit type (0: casts cost nothing): the
  /// common one, and no type's own.
  void set_cast_rate(double bytes_per_s);

  /// The link a collective over all `ranks` workers is bound by: inter when
  /// they span more than one node.
  const Link& flat_link(long long ranks) const;
  LinkKind flat_kind(long long ranks) const;
  /// Nodes that `ranks` workers fill, workers_per_node at a time.
  long long nodes(long long ranks) const;
};

/// A communication time split into its terms, so a prediction can say what
/// bounds it.
struct Cost {
  double latency_s = 0;    ///< the α terms
  double transfer_s = 0;   ///< the bytes / bandwidth terms, all links
  double cast_s = 0;       ///< fp32 <-> fp16/bf16 casts
  std::array<double, 4> transfer_by{};  ///< transfer_s per LinkKind
  double total() const { return latency_s + transfer_s + cast_s; }
  /// Adds `transfer` seconds on `kind`'s link.
  void add_transfer(LinkKind kind, double transfer);
  /// The link that carries the most transfer time; a tie names the outer one.
  LinkKind busiest() const;
  Cost& add(const Cost& other);
};

/// Ring allreduce of `bytes` over `ranks` (Thakur et al. 2005; NCCL's
/// rings): 2(p−1)·α + 2(p−1)/p · S/B. 0 for one rank.
Cost ring_allreduce(double bytes, long long ranks, const Link& link, LinkKind kind);
/// Recursive halving–doubling allreduce (Rabenseifner; Thakur et al.):
/// 2⌈log2 p⌉·α + 2(p−1)/p · S/B.
Cost halving_doubling_allreduce(double bytes, long long ranks, const Link& link, LinkKind kind);
/// Reduce to rank 0 over the binary tree of ranks (children of r: 2r+1,
/// 2r+2; Caffe's tree, dlscale's `tree`), each rank on a full-duplex link of
/// its own: the critical path's message slots times (α + S/B). A parent's
/// link in takes its children's messages one after another as they come,
/// so siblings' subtrees reduce at once: p = 4 → 2 slots, p = 8 → 4. Each
/// message goes one way with nothing coming back: B is link.one_way()'s.
Cost tree_reduce(double bytes, long long ranks, const Link& link, LinkKind kind);
/// The broadcast back down the same tree: a parent sends to both children
/// at once on its link out, so both have the data after 2 slots (1 for an
/// only child): p = 4 → 3 slots, p = 8 → 5.
Cost tree_broadcast(double bytes, long long ranks, const Link& link, LinkKind kind);
/// Reduce-scatter (or all-gather) of a total of `bytes` over `ranks` as a
/// ring: (p−1)·(α + S/(p·B)).
Cost ring_reduce_scatter(double bytes, long long ranks, const Link& link, LinkKind kind);

/// `c` (one message over the nodes' links) bounded by the fabric's busiest
/// uplink when that carries `uplink_bytes` for longer: its transfer becomes
/// uplink_bytes / the uplink's rate, named the fabric uplink.
Cost with_uplink(const Cost& c, double uplink_bytes, const Fabric& f);

/// A ring collective `ring` (one of the above, over `link`) among `nodes`
/// nodes, with the fabric: the ring's ranks lie in order on the nodes, so
/// each group's uplink carries one ring edge each way, as many bytes as one
/// node's link. Its transfer becomes S/min(B, B_uplink) (named the fabric
/// uplink when that binds) once the ring spans more than one group.
Cost ring_over_fabric(const Cost& ring, const Link& link, const Fabric& fabric, long long nodes);

/// Where the members of one side of an all-to-all (a PS's workers or its
/// shards) live: `count` members on consecutive nodes from `first_node`,
/// `per_node` on each (the last node may hold fewer).
struct Placement {
  long long first_node = 0;
  long long per_node = 1;
  long long count = 0;
  /// Members on nodes [lo, hi).
  long long on_nodes(long long lo, long long hi) const;
  long long last_node() const { return first_node + (count + per_node - 1) / per_node - 1; }
};
/// The bytes on the busiest group uplink, one direction, when every sender
/// sends `bytes` spread evenly over every receiver (a PS push; a pull is the
/// same with the sides swapped, so the same bytes): the largest over
/// groups g of senders(g)·receivers(not g)·S/R, and of the reverse.
double all_to_all_uplink_bytes(const Placement& senders, const Placement& receivers, double bytes,
                               const Fabric& fabric);

}  // namespace dlscale::predict
