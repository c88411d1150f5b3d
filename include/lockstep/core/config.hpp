// Compiler and annotation macros shared by every lockstep header.
#pragma once

// One annotation for functions that run on host and device. Without nvcc it is
// plain `inline`, so host-only builds never see CUDA keywords.
#if defined(__CUDACC__)
#define LOCKSTEP_HOST_DEVICE __host__ __device__ inline
#else
#define LOCKSTEP_HOST_DEVICE inline
#endif

#if defined(__GNUC__) || defined(__clang__)
#define LOCKSTEP_RESTRICT __restrict__
#else
#define LOCKSTEP_RESTRICT
#endif

// Before a host loop whose iterations are independent by contract (an
// element-wise functor touches only index i of each array): say so.
// Otherwise the compiler, seeing several float pointers, vectorises only
// behind a runtime alias check, and in some inlining contexts not at all (a
// standalone Adam step ran 4x slower). Nothing in device code.
#if defined(__CUDA_ARCH__)
#define LOCKSTEP_INDEPENDENT_ITERATIONS
#elif defined(__clang__)
#define LOCKSTEP_INDEPENDENT_ITERATIONS _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define LOCKSTEP_INDEPENDENT_ITERATIONS _Pragma("GCC ivdep")
#else
#define LOCKSTEP_INDEPENDENT_ITERATIONS
#endif

namespace lockstep {
// Used in a primary template's static_assert so it fires only when instantiated.
template <class...>
inline constexpr bool dependent_false = false;
}  // namespace lockstep
