// Must not compile: MirroredPolicy takes a collective, not an optimizer.
#include <lockstep/lockstep.hpp>
lockstep::MirroredPolicy<lockstep::Adam> strategy{2};
