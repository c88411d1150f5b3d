// Device and pinned buffers, streams, events and graphs.
#include <doctest/doctest.h>

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
