#!/usr/bin/env python3
"""PyTorch peer of `train_throughput --model cnn`: Keras' simple MNIST convnet
(Conv2D 32 3x3 relu, MaxPooling2D 2, Conv2D 64 3x3 relu, MaxPooling2D 2,
Flatten, Dropout 0.5, Dense 10 logits), Adam lr 1e-3, sparse categorical
cross-entropy, on synthetic 28x28x1 data (cnn_peer.py), one process on
--threads intra-op threads. Runs under Debian's python3-torch 1.13 and torch 2.x.
--device cuda puts the model and the whole data set on the GPU, as a PyTorch
user would for a data set this small (the peer of train_throughput_cuda).
convnet() is the network, also for torch_cnn_fashion.py.
usage: torch_cnn.py [--batch-size B] [--steps S] [--epochs E] [--threads T] [--device cpu|cuda]
                    [--model cnn|cnn_bn]"""
import torch

import cnn_peer


def convnet(init="torch", model="cnn"):
    """The network in PyTorch (NCHW input), on the CPU. init="keras" draws the
    weights as Keras does (Glorot uniform, zero biases), "torch" keeps PyTorch's.
    model="cnn_bn": BatchNormalization after each convolution (no bias), Keras'
    epsilon and momentum (PyTorch's momentum is 1 - Keras')."""
    nn = torch.nn

    def conv(cin, cout):
        if model == "cnn":
            return [nn.Conv2d(cin, cout, 3), nn.ReLU()]
        return [nn.Conv2d(cin, cout, 3, bias=False), nn.BatchNorm2d(cout, eps=1e-3, momentum=0.01), nn.ReLU()]

    net = nn.Sequential(*conv(1, 32), nn.MaxPool2d(2), *conv(32, 64), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Dropout(0.5), nn.Linear(5 * 5 * 64, 10))
    if init == "keras":
        for m in net:
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.xavier_uniform_(m.weight)  # fan_in = Cin*KH*KW, fan_out = Cout*KH*KW: Keras' Glorot
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
    return net


def main():
    args = cnn_peer.parse_args(__doc__, device=True)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"error: --device cuda: torch {torch.__version__} sees no CUDA device; expected at least one")
    device = torch.device(args.device)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    xn, yn = cnn_peer.synthetic(args)
    x = torch.from_numpy(xn).permute(0, 3, 1, 2).contiguous().to(device)  # NCHW: what a PyTorch user feeds
    y = torch.from_numpy(yn).to(device)
    model = convnet(model=args.model).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    batch = args.batch_size

    def train(samples, epochs):
        for _ in range(epochs):
            perm = torch.randperm(samples, device=device)
            for i in range(0, samples, batch):
                idx = perm[i:i + batch]
                opt.zero_grad(set_to_none=True)
                loss = loss_fn(model(x[idx]), y[idx])
                loss.backward()
                opt.step()
        return loss.item()

    cnn_peer.measure(f"torch {torch.__version__} {args.device}", args, train)


if __name__ == "__main__":
    main()
