// Adds the multi-process parts to <lockstep/lockstep.hpp>: MpiAllReduce for
// MultiWorkerMirroredPolicy. Needs <mpi.h>: link the lockstep::mpi target.
#pragma once

#include "lockstep/lockstep.hpp"

#include "lockstep/collective/mpi_all_reduce.hpp"
#include "lockstep/strategy/multi_worker_mirrored.hpp"
