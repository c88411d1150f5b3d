// For GPU tests that need more GPUs than one. Such a test belongs to the
// doctest test suite "multi_gpu" (TEST_CASE("..." * doctest::test_suite("multi_gpu"))),
// which ctest runs as its own entry, "gpu: <name> (2+ GPUs)", that main.cu
// reports as skipped (exit 77) when fewer GPUs are visible; the default entry
// excludes the suite (tests/cuda/CMakeLists.txt). Run directly on too few
// GPUs, the test says so in a sentence (a doctest MESSAGE) and checks nothing.
#pragma once

#include <doctest/doctest.h>

#include "lockstep/backend/cuda/device.cuh"

namespace lockstep::testing {

inline bool enough_gpus(int needed) {
  const int visible = gpu::visible_devices();
  if (visible >= needed) return true;
  MESSAGE("skipped: this test needs " << needed << " GPUs, " << visible << " visible");
  return false;
}

}  // namespace lockstep::testing
