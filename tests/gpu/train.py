"""A small deterministic PyTorch training run for the gpu suite.

Prints the final loss with full precision; the suite compares it with a run
without nvshare. Uses the default caching allocator (cudaMalloc, which
nvshare turns into managed memory), cuBLAS and autograd.
"""
import argparse
import os
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--barrier", help="once set up, create BARRIER.<pid> and wait for BARRIER")
    args = p.parse_args()
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(4096, 1024, generator=gen).cuda()
    y = torch.randint(0, 10, (4096,), generator=gen).cuda()
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, args.width), torch.nn.ReLU(),
        torch.nn.Linear(args.width, args.width), torch.nn.ReLU(),
        torch.nn.Linear(args.width, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    if args.barrier:  # so that two runs train at the same time
        open(f"{args.barrier}.{os.getpid()}", "w").close()
        while not os.path.exists(args.barrier):
            time.sleep(0.01)
    for _ in range(args.steps):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    print(f"train: LOSS {loss.item():.10f} total {total >> 20} MiB free {free >> 20} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
