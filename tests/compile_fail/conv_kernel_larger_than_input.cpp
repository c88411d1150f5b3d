// Must not compile: with Valid padding a 5x5 kernel does not fit a 4x4 input.
#include <lockstep/lockstep.hpp>
lockstep::Sequential<lockstep::Input<4, 4, 1>, lockstep::Conv2D<8, 5, 5>> model;
