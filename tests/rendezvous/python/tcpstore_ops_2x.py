"""PyTorch 2.x's TCPStore client (is_master=False, the G2 protocol) against a store server: every
operation of its Python API, a timed-out wait followed by more use of the same client, and a
client made by clone(). Usage: tcpstore_ops_2x.py PORT. Exits 0 when every check passed.
The same script passes against PyTorch's own server (TCPStore(is_master=True)), which is how its
expectations were checked."""
import datetime
import sys
import threading

import torch.distributed as dist

# The checks that 1.13's client passes alike come from its script. The tests run both from the
# source tree: no __pycache__ is to be left there by the import.
sys.dont_write_bytecode = True
from tcpstore_ops import (TIMEOUT, check_add_and_compare_set, check_binary_and_big_values,
                          check_delete_key, check_wait, connect)

port = int(sys.argv[1])
store = connect(port)
other = connect(port)
assert store.port == port and store.host == "127.0.0.1"
assert store.timeout == TIMEOUT
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

check_add_and_compare_set(store)
assert not store.check(["cs2"])  # a compare_set that did not match created nothing
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
check_delete_key(store, "k1")
assert not store.check(["k1"])

check_wait(store, ["cnt", "log"], dist.DistStoreError)
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
meeting = threading.Thread(target=lambda: done.append(other.barrier("meet", 2, TIMEOUT)))
meeting.start()
store.barrier("meet", 2, TIMEOUT)
meeting.join()

check_binary_and_big_values(store, other)
print("tcpstore_ops_2x: all checks passed")
