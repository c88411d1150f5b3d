// HierarchicalCopyAllReduce: an all-reduce of CUDA replicas made only of
// peer copies and one add kernel (TensorFlow's HierarchicalCopyAllReduce,
// generalised to N replicas), for machines where NCCL is missing or several
// replicas share one GPU. Only declared here, without CUDA headers, so that
// policies naming it are valid types in every build; the Group is defined in
// hierarchical_copy_all_reduce.cuh (nvcc, link lockstep::cuda).
#pragma once

#include <cstddef>
#include <string>

#include "lockstep/collective/collective.hpp"
#include "lockstep/core/backend_tags.hpp"
#include "lockstep/core/error.hpp"

namespace lockstep {

struct HierarchicalCopyAllReduce {
  using backend = Cuda;
  static constexpr const char* kName = "HierarchicalCopyAllReduce";
  class Group;

  // The placement log's words for a `count`-float buffer (the engine's parts,
  // hierarchical_copy_all_reduce.cuh). Its Group offers all_reduce only.
  static std::string describe(std::size_t count, int replicas, int = 1, CollectiveCall = CollectiveCall::kAllReduce) {
    if (replicas <= 1) return "nothing to combine with 1 replica";
    return detail::concat("peer copies (cudaMemcpyPeerAsync) in ", replicas, " parts of up to ",
                          detail::largest_part(count, replicas, 64),
                          " floats (multiples of 64): replica r's GPU sums part r of every replica in replica order "
                          "(reduce-scatter), then every replica copies the parts it does not own (all-gather); 3 "
                          "host barriers per call");
  }
};

}  // namespace lockstep
