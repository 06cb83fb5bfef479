"""One rank of a 2-process gloo job bootstrapped through our store in agent-store mode
(TORCHELASTIC_USE_AGENT_STORE=True, MASTER_ADDR/PORT set by the test)."""
import datetime

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
rank = dist.get_rank()
world = dist.get_world_size()
tensor = torch.tensor([float(rank + 1)])
dist.all_reduce(tensor)
assert tensor.item() == world * (world + 1) / 2, tensor
dist.barrier()
group = dist.new_group([0, 1])
tensor = torch.tensor([1.0])
dist.all_reduce(tensor, group=group)
assert tensor.item() == 2.0, tensor
dist.barrier(group=group)
dist.destroy_process_group()
print(f"rank {rank}: ok")
