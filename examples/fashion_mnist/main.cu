// The same program compiled by nvcc, so that --backend cuda is available:
// lockstep's CUDA headers need the CUDA compiler. Its models are main.cpp's;
// --model cnn and cnn_bn run on GPUs where the build found cuDNN (gpu::Context's
// convolutions, backend/cuda/conv.cuh), and say so at run time where it did not.
#include "main.cpp"
