// The Fashion-MNIST models of the example's --model flag, in one place: the
// example trains them and benchmarks/train_throughput times them, so a
// benchmark figure is always the example's model.
#pragma once

#include <lockstep/lockstep.hpp>

namespace fashion_mnist {

// mlp: the model of TensorFlow's MirroredStrategy guide.
using Mlp = lockstep::Sequential<lockstep::Input<784>, lockstep::Dense<256, lockstep::Relu>, lockstep::Dense<10>>;

// mlp_bn_dropout: the same with BatchNormalization and Dropout after the hidden layer.
using MlpBnDropout = lockstep::Sequential<lockstep::Input<784>, lockstep::Dense<256>, lockstep::BatchNormalization<>,
                                          lockstep::Relu, lockstep::Dropout<20>, lockstep::Dense<10>>;

// cnn: Keras' "simple MNIST convnet" (keras.io/examples/vision/mnist_convnet).
// The data set's rows of 784 pixels are the 28x28x1 images, row by row.
using Cnn = lockstep::Sequential<
    lockstep::Input<28, 28, 1>, lockstep::Conv2D<32, 3, 3, lockstep::Strides<1, 1>, lockstep::Valid, lockstep::Relu>,
    lockstep::MaxPooling2D<2>, lockstep::Conv2D<64, 3, 3, lockstep::Strides<1, 1>, lockstep::Valid, lockstep::Relu>,
    lockstep::MaxPooling2D<2>, lockstep::Flatten, lockstep::Dropout<50>, lockstep::Dense<10>>;

// cnn_bn: the same with BatchNormalization after each convolution, which then
// has no bias (BatchNormalization's beta takes its place), and the relu after it.
template <int Filters>
using ConvBeforeBn = lockstep::Conv2D<Filters, 3, 3, lockstep::Strides<1, 1>, lockstep::Valid, lockstep::Linear, false>;
using CnnBn = lockstep::Sequential<lockstep::Input<28, 28, 1>, ConvBeforeBn<32>, lockstep::BatchNormalization<>,
                                   lockstep::Relu, lockstep::MaxPooling2D<2>, ConvBeforeBn<64>,
                                   lockstep::BatchNormalization<>, lockstep::Relu, lockstep::MaxPooling2D<2>,
                                   lockstep::Flatten, lockstep::Dropout<50>, lockstep::Dense<10>>;

}  // namespace fashion_mnist
