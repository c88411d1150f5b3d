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
import time

import torch

import cnn_peer
from torch_cnn import convnet


def main():
    def extra(p):
        p.add_argument("--init", choices=("keras", "torch"), default="keras", help="initialisers (default keras)")
        cnn_peer.add_device_flag(p)

    a = cnn_peer.parse_fashion_args(__doc__, extra)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)

    # NHWC from the reader to NCHW, on the device: the whole set fits.
    x, y, xt, yt = (torch.from_numpy(v).to(dev) for v in cnn_peer.fashion_mnist(a.data))
    x, xt = x.permute(0, 3, 1, 2).contiguous(), xt.permute(0, 3, 1, 2).contiguous()

    model = convnet(a.init).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()

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
