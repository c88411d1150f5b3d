// lockstep's CUDA backend: everything in lockstep.hpp plus GPU replicas,
// cuBLAS/cuBLASLt GEMMs, the NCCL, hierarchical-copy and one-device
// collectives, and the CUDA executor of the Trainer. Compile with nvcc and
// link lockstep::cuda (and lockstep::mpi for MultiWorkerMirroredPolicy<NcclAllReduce>):
//   lockstep::Trainer<lockstep::MirroredPolicy<lockstep::NcclAllReduce>, lockstep::Adam> trainer;
#pragma once

#if !defined(__CUDACC__)
#error "<lockstep/cuda.hpp> is compiled by nvcc: give this file the .cu extension (or set its LANGUAGE to CUDA) and link lockstep::cuda. Host-only programs include <lockstep/lockstep.hpp>."
#endif

#include "lockstep/lockstep.hpp"

#include "lockstep/backend/cuda/blas.cuh"
#include "lockstep/backend/cuda/buffer.cuh"
#include "lockstep/backend/cuda/check.cuh"
#include "lockstep/backend/cuda/context.cuh"
#include "lockstep/backend/cuda/device.cuh"
#include "lockstep/backend/cuda/launch.cuh"
#include "lockstep/backend/cuda/stream.cuh"
#include "lockstep/backend/cuda/stream_trace.cuh"

#include "lockstep/collective/hierarchical_copy_all_reduce.cuh"
#include "lockstep/collective/nccl_all_reduce.cuh"
#include "lockstep/collective/reduction_to_one_device.cuh"
#if defined(LOCKSTEP_HAVE_MPI)  // lockstep::mpi linked too: MultiWorkerMirroredPolicy<NcclAllReduce>
#include "lockstep/collective/nccl_multi_worker.cuh"
#endif

#include "lockstep/train/cuda_executor.cuh"
