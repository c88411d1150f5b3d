// all_reduce_cuda: the all_reduce benchmark compiled by nvcc, so that one
// binary of the cuda build times the host collectives (--backend host) and
// the CUDA ones (--backend cuda: NCCL, HierarchicalCopy, ReductionToOneDevice).
// The benchmark itself is all_reduce.cpp; this file only switches its CUDA
// mode on.
#define LOCKSTEP_ALL_REDUCE_CUDA 1
#include "all_reduce.cpp"
