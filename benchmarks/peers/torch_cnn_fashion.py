#!/usr/bin/env python3
"""The accuracy peer of `examples/fashion_mnist --model cnn`: the same network
(Keras' simple MNIST convnet: Conv2D 32 3x3 relu, MaxPooling2D 2, Conv2D 64
3x3 relu, MaxPooling2D 2, Flatten, Dropout 0.5, Dense 10 logits), Adam lr
1e-3, batch 128, the 60,000 training images scaled to [0, 1] and shuffled each
epoch, in PyTorch; prints the test accuracy after every epoch. It answers what
this network reaches on Fashion-MNIST in another framework, so that a gap
between lockstep and a target can be told from a gap in the target.

--init keras draws the weights as Keras does (Glorot uniform, zero biases);
--init torch keeps PyTorch's own defaults (Kaiming uniform).
usage: torch_cnn_fashion.py --data DIR [--epochs E] [--batch-size B] [--seed S]
                            [--init keras|torch] [--device cpu|cuda] [--threads T]
Last lines: key=value (test_accuracy=, test_loss=, seconds=)."""
import argparse
import gzip
import os
import time

import numpy as np
import torch


def idx(path):
    """An IDX file (plain or .gz) as a numpy array."""
    for candidate in (path, path + ".gz"):
        if os.path.isfile(candidate):
            opener = gzip.open if candidate.endswith(".gz") else open
            with opener(candidate, "rb") as f:
                raw = f.read()
            break
    else:
        raise SystemExit(f"error: {path}: no such file (nor {path}.gz); expected Fashion-MNIST's IDX files")
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims)
    if data.size != int(np.prod(shape)):
        raise SystemExit(f"error: {path}: {data.size} bytes of data, expected {int(np.prod(shape))} for shape {shape}")
    return data.reshape(shape)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="folder of Fashion-MNIST's four IDX files")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--init", choices=("keras", "torch"), default="keras")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    if a.epochs < 1 or a.batch_size < 1 or a.threads < 1:
        raise SystemExit("error: --epochs, --batch-size and --threads must be >= 1")
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)

    def images(name):
        return torch.from_numpy(idx(os.path.join(a.data, name)).astype(np.float32) / 255.0).unsqueeze(1).to(dev)

    def labels(name):
        return torch.from_numpy(idx(os.path.join(a.data, name)).astype(np.int64)).to(dev)

    x, y = images("train-images-idx3-ubyte"), labels("train-labels-idx1-ubyte")
    xt, yt = images("t10k-images-idx3-ubyte"), labels("t10k-labels-idx1-ubyte")

    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.5), nn.Linear(5 * 5 * 64, 10))
    if a.init == "keras":
        for m in model:
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.xavier_uniform_(m.weight)  # fan_in = Cin*KH*KW, fan_out = Cout*KH*KW: Keras' Glorot
                nn.init.zeros_(m.bias)
    model.to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    def test():
        model.eval()
        with torch.no_grad():
            logits = torch.cat([model(xt[i:i + 1000]) for i in range(0, len(xt), 1000)])
        model.train()
        return (logits.argmax(1) == yt).float().mean().item(), loss_fn(logits, yt).item()

    t0 = time.perf_counter()
    for epoch in range(a.epochs):
        perm = torch.randperm(len(x), device=dev)
        for i in range(0, len(x), a.batch_size):
            b = perm[i:i + a.batch_size]
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x[b]), y[b]).backward()
            opt.step()
        acc, loss = test()
        print(f"epoch {epoch + 1}: test_accuracy={acc:.4f} test_loss={loss:.4f}", flush=True)
    print(f"torch {torch.__version__} {a.device} init={a.init} seed={a.seed} epochs={a.epochs} "
          f"batch_size={a.batch_size}")
    print(f"test_accuracy={acc:.4f}\ntest_loss={loss:.4f}\nseconds={time.perf_counter() - t0:.1f}")


if __name__ == "__main__":
    main()
