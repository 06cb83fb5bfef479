"""PyTorch 2.x's TCPStore client (is_master=False, the G2 protocol) against a store server: every
operation of its Python API, a timed-out wait followed by more use of the same client, and a
client made by clone(). Usage: tcpstore_ops_2x.py PORT. Exits 0 when every check passed.
The same script passes against PyTorch's own server (TCPStore(is_master=True)), which is how its
expectations were checked."""
import datetime
import sys
import threading
import time

import torch.distributed as dist

port = int(sys.argv[1])
timeout = datetime.timedelta(seconds=10)
store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timeout)
other = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timeout)
assert store.port == port and store.host == "127.0.0.1"
assert store.timeout == timeout
assert store.has_extended_api()

store.set("k1", "v1")
assert store.get("k1") == b"v1"

# get() blocks until another client sets the key: the setter starts only once get() has been
# sent (the key is then registered as waited on by the server, seen through `other`).
def late_setter():
    other.set("late", "here")
setter = threading.Timer(0.3, late_setter)
setter.start()
assert store.get("late") == b"here"
setter.join()

assert store.add("cnt", 5) == 5
assert store.add("cnt", -2) == 3
assert store.get("cnt") == b"3"

assert store.compare_set("cs", "", "X") == b"X"          # missing, expected empty: set
assert store.compare_set("cs2", "Y", "Z") == b"Y"        # missing, expected non-empty: not set
assert not store.check(["cs2"])
assert store.compare_set("k1", "v1", "v2") == b"v2"      # present, matching
assert store.compare_set("k1", "bad", "v3") == b"v2"     # present, mismatched

assert store.check(["k1", "cnt"])
assert not store.check(["k1", "absent"])

store.append("log", "a")                                  # creates the key
store.append("log", "bc")
assert store.get("log") == b"abc"

store.multi_set(["m1", "m2", "m3"], ["x", "", "zz"])
assert store.multi_get(["m3", "m1", "m2"]) == [b"zz", b"x", b""]
assert other.multi_get(["k1", "cnt"]) == [b"v2", b"3"]

store.queue_push("q", "first")
store.queue_push("q", "second")
assert store.queue_len("q") == 2
assert store.queue_pop("q") == b"first"
assert store.queue_pop("q", block=False) == b"second"
assert store.queue_len("q") == 0
try:
    store.queue_pop("q", block=False)
    raise AssertionError("non-blocking pop of an empty queue returned")
except dist.DistStoreError:
    pass
# A blocking pop waits for a push from another client.
pusher = threading.Timer(0.3, lambda: other.queue_push("q", "late"))
pusher.start()
assert store.queue_pop("q") == b"late"
pusher.join()

keys = set(store.list_keys())
assert {"k1", "cnt", "cs", "log", "m1", "m2", "m3"} <= keys, keys  # without the "/" prefix
keys_before = store.num_keys()
assert store.delete_key("k1") is True
assert store.delete_key("k1") is False
assert store.num_keys() == keys_before - 1
assert not store.check(["k1"])

store.wait(["cnt", "log"])
store.wait(["cnt"], datetime.timedelta(seconds=1))
t0 = time.monotonic()
try:
    store.wait(["never"], datetime.timedelta(milliseconds=500))
    raise AssertionError("wait on a missing key returned")
except dist.DistStoreError as error:
    assert "timeout" in str(error).lower(), error
assert time.monotonic() - t0 >= 0.45
# The same client goes on working after the timed-out wait (G2 cancels the wait on the server).
store.set("after", "timeout")
assert store.get("after") == b"timeout"
assert store.add("cnt", 1) == 4
other.set("never", "now")
store.wait(["never"], datetime.timedelta(seconds=5))
assert store.get("never") == b"now"

store.set_timeout(datetime.timedelta(seconds=20))
assert store.timeout == datetime.timedelta(seconds=20)

twin = store.clone()  # its own connection to the same server
assert twin.get("after") == b"timeout"
twin.set("from_clone", "1")
assert store.get("from_clone") == b"1"

# barrier(key, world_size): two clients meet.
done = []
meeting = threading.Thread(target=lambda: done.append(other.barrier("meet", 2, timeout)))
meeting.start()
store.barrier("meet", 2, timeout)
meeting.join()

binary = b"\x00a\x00b\xff\x00"
store.set("bin", binary)
assert store.get("bin") == binary
big = bytes(range(256)) * 4096  # 1 MiB
store.set("big", big)
assert store.get("big") == big
assert other.get("big") == big
print("tcpstore_ops_2x: all checks passed")
