#!/usr/bin/env python3
"""TensorFlow/Keras peer of `train_throughput --model cnn`: Keras' simple MNIST
convnet as its example writes it (Conv2D 32 3x3 relu, MaxPooling2D 2, Conv2D 64
3x3 relu, MaxPooling2D 2, Flatten, Dropout 0.5, Dense 10 logits), Adam lr 1e-3,
sparse categorical cross-entropy from logits, model.fit on synthetic 28x28x1
data (cnn_peer.py), one process: --threads intra-op threads and one inter-op
thread (the model is a chain: ops have little to run side by side, and a second
inter-op pool would only contend for the same cores).
compiled_convnet() is the network, also for tf_cnn_fashion.py.
usage: tf_cnn.py [--batch-size B] [--steps S] [--epochs E] [--threads T] [--model cnn|cnn_bn]"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's start-up notices off the output

import cnn_peer  # noqa: E402


def compiled_convnet(keras, metrics=(), model="cnn"):
    """The network in Keras, compiled with Adam 1e-3 and the cross-entropy from logits;
    model="cnn_bn": BatchNormalization after each convolution (no bias), then the relu."""
    layers = keras.layers

    def conv(filters):
        if model == "cnn":
            return [layers.Conv2D(filters, 3, activation="relu")]
        return [layers.Conv2D(filters, 3, use_bias=False), layers.BatchNormalization(), layers.ReLU()]

    net = keras.Sequential([keras.Input((28, 28, 1)), *conv(32), layers.MaxPooling2D(2), *conv(64),
                            layers.MaxPooling2D(2), layers.Flatten(), layers.Dropout(0.5), layers.Dense(10)])
    net.compile(optimizer=keras.optimizers.Adam(1e-3),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=list(metrics))
    return net


def main():
    args = cnn_peer.parse_args(__doc__)
    import tensorflow as tf
    import keras

    # Before any op runs: TensorFlow fixes its thread pools on first use.
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    keras.utils.set_random_seed(0)
    x, y = cnn_peer.synthetic(args)
    model = compiled_convnet(keras, model=args.model)

    def train(samples, epochs):
        history = model.fit(x[:samples], y[:samples], batch_size=args.batch_size, epochs=epochs, shuffle=True,
                            verbose=0)
        return float(history.history["loss"][-1])

    cnn_peer.measure(f"tensorflow {tf.__version__} keras {keras.__version__}", args, train)


if __name__ == "__main__":
    main()
