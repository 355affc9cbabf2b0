"""A small CNN on synthetic 32x32 images, for GPU throughput through Stoker vs bare.

  python3 cnn.py [--steps 300] [--warmup 30] [--batch 256]

Prints one line `gpu-bench: {json}` with images/s over the timed steps (after
warmup), seconds from process start to the first finished step, the device
name and CUDA_VISIBLE_DEVICES. Needs torch with CUDA; exits 3 without a GPU.
"""
import json
import os
import sys
import time

START = time.time()

import argparse  # noqa: E402

import torch  # noqa: E402
from torch import nn  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--steps', type=int, default=300)
    p.add_argument('--warmup', type=int, default=30)
    p.add_argument('--batch', type=int, default=256)
    a = p.parse_args()
    if not torch.cuda.is_available():
        print('gpu-bench: no CUDA device', file=sys.stderr)
        return 3
    dev = torch.device('cuda')
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2), nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(128 * 8 * 8, 256), nn.ReLU(), nn.Linear(256, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(a.batch, 3, 32, 32, device=dev)
    y = torch.randint(0, 10, (a.batch,), device=dev)
    loss_fn = nn.CrossEntropyLoss()
    first_step = None
    t0 = None
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            torch.cuda.synchronize()
            t0 = time.time()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if first_step is None:
            torch.cuda.synchronize()
            first_step = time.time() - START
    torch.cuda.synchronize()
    elapsed = time.time() - t0
    print('gpu-bench: ' + json.dumps({
        'images_per_s': round(a.steps * a.batch / elapsed, 1),
        'first_step_s': round(first_step, 3),
        'device': torch.cuda.get_device_name(0),
        'cuda_visible_devices': os.environ.get('CUDA_VISIBLE_DEVICES'),
        'loss': round(loss.item(), 4),
    }), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
