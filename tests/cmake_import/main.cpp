// A downstream program that trains a tiny model through lockstep as a
// consumer gets it (find_package, add_subdirectory, FetchContent, Conan's
// test_package, vcpkg): the package is usable. Linked to lockstep::mpi
// (LOCKSTEP_HAVE_MPI) it trains across the processes of an mpirun job.
#include <cstdio>
#include <lockstep/lockstep.hpp>
#if defined(LOCKSTEP_HAVE_MPI)
#include <lockstep/mpi.hpp>
#endif

int main() {
  using namespace lockstep;
#if defined(LOCKSTEP_HAVE_MPI)
  using Strategy = MultiWorkerMirroredPolicy<MpiAllReduce>;
  const Strategy strategy{1};  // one replica per process
#else
  using Strategy = MirroredPolicy<HostAllReduce>;
  const Strategy strategy{2};
#endif
  std::vector<float> x = {0, 0, 0, 1, 1, 0, 1, 1};
  std::vector<std::int32_t> y = {0, 0, 1, 1};  // the first feature
  const Dataset data(x, 2, y);
  Sequential<Input<2>, Dense<8, Relu>, Dense<2>> model{0};
  Trainer<Strategy, Adam> trainer{strategy, Adam{0.05}};
  FitOptions options;
  options.epochs = 300;
  options.batch_size = 4;
  options.verbose = false;
  trainer.fit(model, data, options);
  const double accuracy = trainer.evaluate(model, data)["accuracy"];
  std::printf("lockstep %s: gemm=%s accuracy %.2f\n", LOCKSTEP_VERSION_STRING, host::kGemmPath, accuracy);
  return accuracy == 1.0 ? 0 : 1;
}
