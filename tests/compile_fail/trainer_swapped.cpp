// Must not compile: Trainer's arguments are <Strategy, Optimizer>.
#include <lockstep/lockstep.hpp>
lockstep::Trainer<lockstep::Adam, lockstep::MirroredPolicy<lockstep::HostAllReduce>> trainer;
