// Device and pinned buffers, streams, events and graphs; checked calls.
#include <doctest/doctest.h>

#include <thread>
#include <vector>

#include "lockstep/backend/cuda/buffer.cuh"
#include "lockstep/backend/cuda/stream.cuh"

using namespace lockstep;

TEST_CASE("a device buffer round-trips through pinned memory on a stream") {
  gpu::Stream stream;
  gpu::PinnedBuffer<float> host(1000);
  for (std::size_t i = 0; i < host.size(); ++i) host.data()[i] = static_cast<float>(i) * 0.5f;
  gpu::DeviceBuffer<float> device(1000);
  gpu::PinnedBuffer<float> back(1000);
  LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(device.data(), host.data(), host.bytes(), cudaMemcpyHostToDevice, stream));
  LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(back.data(), device.data(), device.bytes(), cudaMemcpyDeviceToHost, stream));
  stream.synchronize();
  for (std::size_t i = 0; i < back.size(); ++i) REQUIRE(back.data()[i] == host.data()[i]);
}

TEST_CASE("new device buffers are zero") {
  gpu::DeviceBuffer<float> device(257);
  std::vector<float> back(257, 1.0f);
  LOCKSTEP_CUDA_CHECK(cudaMemcpy(back.data(), device.data(), device.bytes(), cudaMemcpyDeviceToHost));
  for (float v : back) REQUIRE(v == 0.0f);
}

TEST_CASE("an impossible allocation is a lockstep::Error that names the bytes and the GPU") {
  CHECK_THROWS_WITH_AS(gpu::DeviceBuffer<float>(std::size_t(1) << 50),
                       doctest::Contains("could not allocate 4503599627370496 bytes on GPU"), Error);
  gpu::DeviceBuffer<float> after(16);  // the failure left the device usable
  CHECK(after.data() != nullptr);
}

TEST_CASE("a failing CUDA call names the call and the error") {
  CHECK_THROWS_WITH_AS(LOCKSTEP_CUDA_CHECK(cudaSetDevice(9999)), doctest::Contains("cudaSetDevice(9999)"), Error);
}

namespace {
__global__ void do_nothing() {}
}  // namespace

TEST_CASE("a failed check clears the thread's last CUDA error, so the next launch check does not report it") {
  // A failing runtime call records its status as the thread's last error;
  // LOCKSTEP_CUDA_CHECK_LAUNCH reads that, so without the clearing the next
  // (good) launch would throw this old error as its own.
  CHECK_THROWS_AS(LOCKSTEP_CUDA_CHECK(cudaSetDevice(9999)), Error);
  CHECK(cudaPeekAtLastError() == cudaSuccess);
  do_nothing<<<1, 1>>>();
  CHECK_NOTHROW(LOCKSTEP_CUDA_CHECK_LAUNCH());

  // A bad launch configuration: the launch check throws, and clears it too.
  // Which error it is depends on the runtime: CUDA 12 says
  // cudaErrorInvalidConfiguration, CUDA 13 (driver 580, an H200)
  // cudaErrorInvalidValue. Either way the message names the call and the error.
  do_nothing<<<1, 4096>>>();  // more threads per block than any GPU allows
  CHECK_THROWS_WITH_AS(LOCKSTEP_CUDA_CHECK_LAUNCH(), doctest::Contains("cudaGetLastError() failed"), Error);
  CHECK(cudaPeekAtLastError() == cudaSuccess);
  do_nothing<<<1, 1>>>();
  CHECK_NOTHROW(LOCKSTEP_CUDA_CHECK_LAUNCH());
  LOCKSTEP_CUDA_CHECK(cudaDeviceSynchronize());

  // The last error is per host thread: a failure on another thread neither
  // reaches this one nor stays on its own.
  cudaError_t other = cudaErrorUnknown;
  std::thread([&] {
    try {
      LOCKSTEP_CUDA_CHECK(cudaSetDevice(9999));
    } catch (const Error&) {
    }
    other = cudaPeekAtLastError();
  }).join();
  CHECK(other == cudaSuccess);
  CHECK(cudaPeekAtLastError() == cudaSuccess);
}
