"""PyTorch's own TCPStore client (is_master=False) against our store: every operation the
1.13 Python API offers. Usage: tcpstore_ops.py PORT. Exits 0 when every check passed."""
import datetime
import sys
import threading
import time

import torch.distributed as dist

port = int(sys.argv[1])
timeout = datetime.timedelta(seconds=10)
store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timeout)
other = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timeout)

store.set("k1", "v1")
assert store.get("k1") == b"v1"

# get() blocks until another client sets the key.
DELAY = 0.3
started = threading.Event()
def late_setter():
    started.wait()
    time.sleep(DELAY)  # the delay is what makes the get() block
    other.set("late", "here")
setter = threading.Thread(target=late_setter)
setter.start()
t0 = time.monotonic()
started.set()
assert store.get("late") == b"here"
assert time.monotonic() - t0 >= DELAY * 0.9
setter.join()

assert store.add("cnt", 5) == 5
assert store.add("cnt", -2) == 3
assert store.get("cnt") == b"3"

assert store.compare_set("cs", "", "X") == b"X"          # missing, expected empty
assert store.compare_set("cs2", "Y", "Z") == b"Y"        # missing, expected non-empty
assert store.compare_set("k1", "v1", "v2") == b"v2"      # present, matching
assert store.compare_set("k1", "bad", "v3") == b"v2"     # present, mismatched

store.wait(["k1", "cnt"])
store.wait(["k1"], datetime.timedelta(seconds=1))
t0 = time.monotonic()
try:
    store.wait(["never"], datetime.timedelta(milliseconds=500))
    raise AssertionError("wait on a missing key returned")
except RuntimeError as error:
    assert "Timeout" in str(error) or "timeout" in str(error), error
assert time.monotonic() - t0 >= 0.45

# 1.13 clients desync after a timed-out wait (tcpstore_protocol.md §4.6); use a fresh one.
store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timeout)
keys_before = store.num_keys()
assert store.delete_key("k1") is True
assert store.delete_key("k1") is False
assert store.num_keys() == keys_before - 1

binary = b"\x00a\x00b\xff\x00"
store.set("bin", binary)
assert store.get("bin") == binary
big = bytes(range(256)) * 4096  # 1 MiB
store.set("big", big)
assert store.get("big") == big
assert other.get("big") == big
print("tcpstore_ops: all checks passed")
