// HierarchicalCopyAllReduce: an all-reduce of CUDA replicas made only of
// peer copies and one add kernel (TensorFlow's HierarchicalCopyAllReduce,
// generalised to N replicas), for machines where NCCL is missing or several
// replicas share one GPU. Only declared here, without CUDA headers, so that
// policies naming it are valid types in every build; the Group is defined in
// hierarchical_copy_all_reduce.cuh (nvcc, link lockstep::cuda).
#pragma once

#include "lockstep/core/backend_tags.hpp"

namespace lockstep {

struct HierarchicalCopyAllReduce {
  using backend = Cuda;
  static constexpr const char* kName = "HierarchicalCopyAllReduce";
  class Group;
};

}  // namespace lockstep
