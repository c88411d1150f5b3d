// Must not compile: a Sequential model starts with Input<N>.
#include <lockstep/lockstep.hpp>
lockstep::Sequential<lockstep::Dense<10>> model;
