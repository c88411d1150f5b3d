// train_throughput compiled by nvcc: adds --backend cuda.
#include "train_throughput.cpp"
