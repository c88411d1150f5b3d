#!/usr/bin/env python3
"""The Keras accuracy peer of `examples/fashion_mnist --model cnn`: Keras' simple
MNIST convnet as its example writes it (Conv2D 32 3x3 relu, MaxPooling2D 2,
Conv2D 64 3x3 relu, MaxPooling2D 2, Flatten, Dropout 0.5, Dense 10 logits;
Keras' initialisers), Adam lr 1e-3, model.fit at batch 128 on the 60,000
training images scaled to [0, 1], shuffled each epoch; prints the test accuracy
after every epoch. With torch_cnn_fashion.py it says what this network reaches
on Fashion-MNIST in the frameworks people train it with.
usage: tf_cnn_fashion.py --data DIR [--epochs E] [--batch-size B] [--seed S] [--threads T]
Last lines: key=value (test_accuracy=, test_loss=, seconds=)."""
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's start-up notices off the output

import cnn_peer  # noqa: E402
from tf_cnn import compiled_convnet  # noqa: E402


def main():
    a = cnn_peer.parse_fashion_args(__doc__)
    x, y, xt, yt = cnn_peer.fashion_mnist(a.data)

    import tensorflow as tf
    import keras

    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    keras.utils.set_random_seed(a.seed)
    model = compiled_convnet(keras, metrics=["accuracy"])

    class EachEpoch(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            loss, acc = self.model.evaluate(xt, yt, batch_size=1000, verbose=0)
            print(f"epoch {epoch + 1}: test_accuracy={acc:.4f} test_loss={loss:.4f}", flush=True)

    t0 = time.perf_counter()
    model.fit(x, y, batch_size=a.batch_size, epochs=a.epochs, shuffle=True, verbose=0, callbacks=[EachEpoch()])
    seconds = time.perf_counter() - t0
    loss, acc = model.evaluate(xt, yt, batch_size=1000, verbose=0)
    print(f"tensorflow {tf.__version__} keras {keras.__version__} seed={a.seed} epochs={a.epochs} "
          f"batch_size={a.batch_size}")
    print(f"test_accuracy={acc:.4f}\ntest_loss={loss:.4f}\nseconds={seconds:.1f}")


if __name__ == "__main__":
    main()
