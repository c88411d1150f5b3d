// train_throughput compiled by nvcc: adds --backend cuda. Its models are
// train_throughput.cpp's; --model cnn runs on GPUs where the build found cuDNN.
#include "train_throughput.cpp"
