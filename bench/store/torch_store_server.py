"""Hosts PyTorch's own TCPStore server, the reference of bench/store, alone in this process:
torch.distributed.TCPStore(is_master=True) with the libuv backend (PyTorch's default since 2.4)
or the legacy one. Prints "0.0.0.0:<port>" and serves until SIGTERM or SIGINT. While it serves,
the Python thread sleeps in sigwait, so the process's CPU time is the server's.
usage: torch_store_server.py [--backend libuv|legacy] [--port N]"""
import argparse
import datetime
import resource
import signal

import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("libuv", "legacy"), default="libuv")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    # The same descriptor allowance as ddprun-store takes: the hard limit.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    stop = {signal.SIGTERM, signal.SIGINT}
    # Blocked before the server's thread starts, so only sigwait below receives them.
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)
    store = dist.TCPStore("0.0.0.0", args.port, is_master=True, wait_for_workers=False,
                          use_libuv=args.backend == "libuv",
                          timeout=datetime.timedelta(seconds=300))
    if store.libuvBackend != (args.backend == "libuv"):
        raise SystemExit(f"torch_store_server: asked for {args.backend}, got the other backend")
    print(f"0.0.0.0:{store.port}", flush=True)
    signal.sigwait(stop)


if __name__ == "__main__":
    main()
