// Must not compile: MultiWorkerMirroredPolicy needs a collective that spans processes.
#include <lockstep/lockstep.hpp>
lockstep::MultiWorkerMirroredPolicy<lockstep::HostAllReduce> strategy{1};
