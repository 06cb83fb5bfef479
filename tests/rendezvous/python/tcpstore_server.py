"""Hosts PyTorch's own TCPStore servers on 127.0.0.1 for StoreKv's tests: the legacy server
(every version), and the libuv one where this torch has it (2.2+). Prints one line
"<backend> <port>" per server, then "ready", then serves until killed."""
import signal
import sys

import torch.distributed as dist


def host(**options):
    return dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, **options)


servers = []
try:
    servers.append(("legacy", host(use_libuv=False)))
    servers.append(("libuv", host(use_libuv=True)))
except TypeError:  # torch <= 2.0: no use_libuv option, the legacy server only
    servers.append(("legacy", host()))

for backend, store in servers:
    print(backend, store.port)
print("ready")
sys.stdout.flush()
signal.pause()
