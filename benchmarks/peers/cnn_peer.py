"""What the CNN peers (torch_cnn.py, tf_cnn.py) share: the command line, the
synthetic data set and the timed loop, so that each peer holds only its
framework's model and step and all of them are measured alike; and the
accuracy peers (torch_cnn_fashion.py, tf_cnn_fashion.py) read Fashion-MNIST
through fashion_mnist() here.

--model cnn_bn puts BatchNormalization (Keras' defaults: epsilon 1e-3, momentum
0.99) after each convolution, which then has no bias, and the relu after it, as
train_throughput --model cnn_bn (examples/fashion_mnist/models.hpp) does.

The data set matches benchmarks/train_throughput --model cnn: STEPS batches of
BATCH 28x28x1 samples of uniform pixels in [0, 1) and labels uniform in 0..9,
trained EPOCHS times after three untimed batches of warm-up. The last lines are
key=value, `samples_per_s=` as train_throughput prints it."""
import argparse
import gzip
import math
import os
import time

import numpy as np


def positive(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer >= 1")
    return value


def add_device_flag(parser):
    """--device cpu|cuda (PyTorch's peers): where the model and the data set live."""
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the model and the data set live (default cpu)")


def parse_args(description, device=False):
    """The shared flags; with device=True also --device (cpu or cuda: PyTorch's)."""
    p = argparse.ArgumentParser(description=description)
    if device:
        add_device_flag(p)
    p.add_argument("--batch-size", type=positive, default=128, help="samples per step (default 128)")
    p.add_argument("--steps", type=positive, default=469, help="batches in the data set (default 469: 60,032 samples)")
    p.add_argument("--epochs", type=positive, default=1, help="timed passes over the data set (default 1)")
    p.add_argument("--threads", type=positive, default=1, help="threads the framework may use (default 1)")
    p.add_argument("--model", choices=("cnn", "cnn_bn"), default="cnn",
                   help="the convnet, or the same with BatchNormalization after each convolution (default cnn)")
    return p.parse_args()


def synthetic(args):
    """(x, y): x float32 (N, 28, 28, 1) channels-last as Keras', y int64 (N,)."""
    n = args.batch_size * args.steps
    rng = np.random.default_rng(1)
    return rng.random((n, 28, 28, 1), dtype=np.float32), rng.integers(0, 10, n, dtype=np.int64)


def measure(framework, args, train):
    """train(samples, epochs) trains on the first `samples` samples, shuffled each
    epoch, and returns the last batch's loss. Prints what was run, then
    samples_per_s and step_ms over the timed epochs."""
    n = args.batch_size * args.steps
    train(min(n, 3 * args.batch_size), 1)  # warm-up: kernels chosen, graphs traced, memory touched
    t0 = time.perf_counter()
    loss = train(n, args.epochs)
    seconds = time.perf_counter() - t0
    if not math.isfinite(loss):
        raise SystemExit(f"error: {framework}: the last loss is {loss}; expected a finite number")
    print(f"{framework} model={args.model} threads={args.threads} batch_size={args.batch_size} steps={args.steps} "
          f"epochs={args.epochs} loss={loss:.4f}")
    print(f"samples_per_s={n * args.epochs / seconds:.0f} step_ms={seconds * 1e3 / (args.steps * args.epochs):.3f}")


def read_idx(path):
    """An IDX file (plain, else PATH.gz) as a numpy array of its shape."""
    for candidate in (path, path + ".gz"):
        if os.path.isfile(candidate):
            with (gzip.open if candidate.endswith(".gz") else open)(candidate, "rb") as f:
                raw = f.read()
            break
    else:
        raise SystemExit(f"error: {path}: no such file (nor {path}.gz); expected one of Fashion-MNIST's IDX files")
    dims = raw[3] if len(raw) >= 4 else 0
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=min(len(raw), 4 + 4 * dims))
    if dims == 0 or raw[:3] != b"\0\0\x08" or data.size != int(np.prod(shape)):
        raise SystemExit(f"error: {path}: not an IDX file of unsigned bytes whose header matches its size")
    return data.reshape(shape)


def fashion_mnist(folder):
    """(x_train, y_train, x_test, y_test): images float32 (N, 28, 28, 1) in [0, 1], labels int64."""
    def images(name):
        return (read_idx(os.path.join(folder, name)).astype(np.float32) / 255.0)[..., None]

    def labels(name):
        return read_idx(os.path.join(folder, name)).astype(np.int64)

    return (images("train-images-idx3-ubyte"), labels("train-labels-idx1-ubyte"),
            images("t10k-images-idx3-ubyte"), labels("t10k-labels-idx1-ubyte"))


def parse_fashion_args(description, extra=None):
    """The accuracy peers' flags: --data, --epochs (10), --batch-size (128), --seed (0),
    --threads (2); extra(parser) adds a peer's own."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="folder of Fashion-MNIST's four IDX files (plain or .gz)")
    p.add_argument("--epochs", type=positive, default=10, help="epochs (default 10)")
    p.add_argument("--batch-size", type=positive, default=128, help="samples per step (default 128)")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights, the shuffle and dropout (default 0)")
    p.add_argument("--threads", type=positive, default=2, help="threads the framework may use (default 2)")
    if extra:
        extra(p)
    return p.parse_args()
