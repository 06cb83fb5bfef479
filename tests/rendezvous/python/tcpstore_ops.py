"""PyTorch's own TCPStore client (is_master=False) against our store: every operation the
1.13 Python API offers. Usage: tcpstore_ops.py PORT. Exits 0 when every check passed.
The checks that PyTorch 2.x's client passes alike are the functions below, which
tcpstore_ops_2x.py imports, so that both generations are held to the same expectations."""
import datetime
import sys
import threading
import time

import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=10)


def connect(port):
    return dist.TCPStore("127.0.0.1", port, is_master=False, timeout=TIMEOUT)


def check_add_and_compare_set(store):
    """add() on a new and an existing key; compare_set() on missing and present keys. Expects
    "k1" to hold "v1"; leaves "cnt" at 3, "cs" at "X", "k1" at "v2" and "cs2" unset."""
    assert store.add("cnt", 5) == 5
    assert store.add("cnt", -2) == 3
    assert store.get("cnt") == b"3"

    assert store.compare_set("cs", "", "X") == b"X"          # missing, expected empty: set
    assert store.compare_set("cs2", "Y", "Z") == b"Y"        # missing, expected non-empty: not set
    assert store.compare_set("k1", "v1", "v2") == b"v2"      # present, matching
    assert store.compare_set("k1", "bad", "v3") == b"v2"     # present, mismatched


def check_delete_key(store, key):
    """Deletes `key`, which must exist: only the first delete finds it, and it no longer counts."""
    keys_before = store.num_keys()
    assert store.delete_key(key) is True
    assert store.delete_key(key) is False
    assert store.num_keys() == keys_before - 1


def check_wait(store, present_keys, timeout_error):
    """wait() returns at once for keys that exist, with and without its own timeout; on a key
    nobody sets it fails with `timeout_error` after that timeout, not the store's."""
    store.wait(present_keys)
    store.wait(present_keys[:1], datetime.timedelta(seconds=1))
    t0 = time.monotonic()
    try:
        store.wait(["never"], datetime.timedelta(milliseconds=500))
        raise AssertionError("wait on a missing key returned")
    except timeout_error as error:
        assert "timeout" in str(error) or "Timeout" in str(error), error
    assert time.monotonic() - t0 >= 0.45


def check_binary_and_big_values(store, other):
    """Values with NUL and non-UTF-8 bytes, and one of 1 MiB, come back as set, to either client."""
    binary = b"\x00a\x00b\xff\x00"
    store.set("bin", binary)
    assert store.get("bin") == binary
    big = bytes(range(256)) * 4096  # 1 MiB
    store.set("big", big)
    assert store.get("big") == big
    assert other.get("big") == big


def main(port):
    store = connect(port)
    other = connect(port)

    store.set("k1", "v1")
    assert store.get("k1") == b"v1"

    # get() blocks until another client sets the key.
    delay = 0.3
    started = threading.Event()

    def late_setter():
        started.wait()
        time.sleep(delay)  # the delay is what makes the get() block
        other.set("late", "here")
    setter = threading.Thread(target=late_setter)
    setter.start()
    t0 = time.monotonic()
    started.set()
    assert store.get("late") == b"here"
    assert time.monotonic() - t0 >= delay * 0.9
    setter.join()

    check_add_and_compare_set(store)
    check_wait(store, ["k1", "cnt"], RuntimeError)

    # 1.13 clients desync after a timed-out wait (tcpstore_protocol.md §4.6); use a fresh one.
    store = connect(port)
    check_delete_key(store, "k1")
    check_binary_and_big_values(store, other)
    print("tcpstore_ops: all checks passed")


if __name__ == "__main__":
    main(int(sys.argv[1]))
