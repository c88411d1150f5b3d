// Must not compile in a host-only build: NcclAllReduce needs the CUDA backend.
#include <lockstep/lockstep.hpp>
lockstep::Trainer<lockstep::MirroredPolicy<lockstep::NcclAllReduce>, lockstep::Adam> trainer;
