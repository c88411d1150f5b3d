// Must not compile: Dense takes a flat vector per sample; an image needs Flatten first.
#include <lockstep/lockstep.hpp>
lockstep::Sequential<lockstep::Input<28, 28, 1>, lockstep::Dense<10>> model;
