// The same program compiled by nvcc, so that --backend cuda is available:
// lockstep's CUDA headers need the CUDA compiler.
#include "main.cpp"
