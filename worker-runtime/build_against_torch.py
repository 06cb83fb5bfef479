#!/usr/bin/env python3
"""ddprun-train for the torch of the Python that runs this, built on first use.

A pip-installed ddprun has no ddprun-train: the trainer links LibTorch, and the user's torch is
their own (its version, CPU or CUDA). `ddprun ... train` runs this script with the environment's
Python; it prints the path of a ddprun-train compiled against that torch, from a per-user cache,
and compiles it there first when the cache has none (minutes, once per torch).

    build_against_torch.py --source DIR

stdout: the trainer's path, one line. stderr: progress, and on failure one message naming the
problem. Exit 0 with a path; 2 when it cannot be built here (no torch, a torch outside the
supported range, no C++20 compiler, no CMake, a CUDA torch without nvcc, an unwritable cache);
1 when the compile failed (the log's last lines are shown).

The cache: $DDPRUN_CACHE_DIR, else $XDG_CACHE_HOME/ddprun, else ~/.cache/ddprun; one folder per
torch (version, CUDA version, C++ ABI, and a digest of where it is installed and of the trainer's
sources). Concurrent callers (8 ranks, or one agent per node on a shared home) take a lock on
that folder's lock file: one builds, the others wait and then use its result. The trainer
appears in the cache only by an atomic rename, complete or not at all.

Only the standard library: this runs before anything else of the job, under any Python >= 3.10.
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import functools
import hashlib
import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The torch releases ddprun-train is built and tested against (README: "On a cluster, without
# root"). DDPRUN_ANY_TORCH=1 tries another anyway.
SUPPORTED_TORCH = ((2, 13), (2, 14))
MIN_CMAKE = (3, 25)
PROGRESS_EVERY_S = 15.0
LOG_TAIL_LINES = 25
# A compile of a LibTorch source takes up to ~1.5 GiB: fewer parallel compiles than CPUs where
# memory is short.
GIB_PER_COMPILE = 2


class CannotBuild(Exception):
    """This machine or environment cannot build the trainer: exit 2 with the message."""


class BuildFailed(Exception):
    """The compile itself failed: exit 1 with the message."""


def say(message: str) -> None:
    print(f"ddprun: {message}", file=sys.stderr, flush=True)


def version_tuple(text: str) -> tuple[int, ...]:
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(part) for part in match.groups() if part is not None) if match else ()


class Torch:
    """The torch this Python imports, read from its files without importing it (an import takes
    seconds; every `ddprun ... train` asks)."""

    def __init__(self) -> None:
        spec = importlib.util.find_spec("torch")
        if spec is None or not spec.submodule_search_locations:
            raise CannotBuild(
                f"{sys.executable} has no torch: pip install torch (2.13 or 2.14) into this "
                "environment; ddprun-train is compiled against it")
        self.root = Path(list(spec.submodule_search_locations)[0])
        try:
            version_py = (self.root / "version.py").read_text()
        except OSError as error:
            raise CannotBuild(f"cannot read torch's version ({error})") from error
        self.version = self._field(version_py, "__version__") or "unknown"
        self.cuda = self._field(version_py, "cuda")
        self.git = self._field(version_py, "git_version") or ""
        self.library = self.root / "lib" / "libc10.so"

    def require_library(self) -> None:
        if not self.library.is_file():
            raise CannotBuild(f"torch at {self.root} has no lib/libc10.so: it is not a LibTorch "
                              "that C++ can link (a pip or conda torch is)")

    @staticmethod
    def _field(text: str, name: str) -> str | None:
        match = re.search(rf"^{name}\s*(?::[^=]*)?=\s*['\"]([^'\"]*)['\"]", text, re.M)
        return match.group(1) if match else None

    @functools.cached_property
    def cxx11_abi(self) -> int:
        # A library built with the old std::string ABI has no __cxx11 names at all.
        return 1 if b"__cxx11" in self.library.read_bytes() else 0

    def describe(self) -> str:
        return f"torch {self.version} ({'CUDA ' + self.cuda if self.cuda else 'CPU'})"


def check_supported(torch: Torch) -> None:
    minor = version_tuple(torch.version)[:2]
    if minor in SUPPORTED_TORCH or os.environ.get("DDPRUN_ANY_TORCH") == "1":
        return
    low, high = SUPPORTED_TORCH[0], SUPPORTED_TORCH[-1]
    raise CannotBuild(
        f"{torch.describe()} at {torch.root} is outside the range ddprun-train supports "
        f"({low[0]}.{low[1]} to {high[0]}.{high[1]}): pip install 'torch>={low[0]}.{low[1]},"
        f"<{high[0]}.{high[1] + 1}', or set DDPRUN_ANY_TORCH=1 to try this one anyway")


def source_digest(source: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(source)).encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def cache_key(torch: Torch, source: Path) -> str:
    # Where torch lies and when its library was written: a reinstalled or another environment's
    # torch of the same version gets a trainer of its own (the trainer links that torch by path).
    stat = torch.library.stat()
    identity = f"{torch.root.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\0{torch.git}\0"
    digest = hashlib.sha256((identity + source_digest(source)).encode()).hexdigest()[:16]
    cuda = f"cuda{torch.cuda}" if torch.cuda else "cpu"
    version = re.sub(r"[^A-Za-z0-9.]+", "_", torch.version)
    return f"torch{version}-{cuda}-cxx11abi{torch.cxx11_abi}-{digest}"


def cache_root() -> Path:
    if os.environ.get("DDPRUN_CACHE_DIR"):
        return Path(os.environ["DDPRUN_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ddprun"


def prepare_cache(root: Path) -> Path:
    trainers = root / "trainers"
    try:
        trainers.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=trainers, prefix=".probe.")
        probe.close()
    except OSError as error:
        raise CannotBuild(
            f"the cache folder {trainers} is not writable ({error.strerror or error}): set "
            "DDPRUN_CACHE_DIR to a folder of yours (on a file system the nodes share, to build "
            "once for all of them)") from error
    return trainers


def find_tool(name: str) -> str | None:
    # The environment's own first (PyPI's cmake and ninja install beside its python).
    beside = Path(sys.executable).parent / name
    if os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name)


def check_compiler() -> str:
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not compiler:
        raise CannotBuild("no C++ compiler: ddprun-train is compiled against your torch and "
                          "needs g++ 11 or newer; install one, or set CXX to its path (RHEL/Rocky: "
                          "gcc-toolset-12; a cluster: `module load gcc`)")
    probe = "#include <span>\n#include <stop_token>\nint main() { return 0; }\n"
    try:
        result = subprocess.run([compiler, "-std=c++20", "-x", "c++", "-fsyntax-only", "-"],
                                input=probe, capture_output=True, text=True, timeout=120)
    except OSError as error:
        raise CannotBuild(f"the C++ compiler {compiler} does not run ({error.strerror}): set CXX "
                          "to a working g++ 11 or newer") from error
    if result.returncode != 0:
        first = (result.stderr.strip().splitlines() or ["(no message)"])[0]
        raise CannotBuild(f"the C++ compiler {compiler} cannot compile C++20 ({first}): "
                          "ddprun-train needs g++ 11 or newer; set CXX to one")
    return compiler


def check_cmake() -> str:
    cmake = find_tool("cmake")
    if not cmake:
        raise CannotBuild("no cmake: pip install 'cmake>=3.25' into this environment")
    output = subprocess.run([cmake, "--version"], capture_output=True, text=True).stdout
    found = version_tuple(output.split("version")[-1].strip()) if "version" in output else ()
    if found[:2] < MIN_CMAKE:
        raise CannotBuild(f"{cmake} is version {'.'.join(map(str, found)) or '?'}; ddprun-train "
                          "needs cmake 3.25 or newer: pip install 'cmake>=3.25'")
    return cmake


def check_nvcc(torch: Torch) -> None:
    # Where cmake/DdprunTorch.cmake looks, in its order: $CUDA_HOME when set (and then only
    # there), else /usr/local/cuda, else nvcc on PATH.
    if not torch.cuda:
        return
    wanted = f"the CUDA toolkit's nvcc (CUDA {torch.cuda})"
    if os.environ.get("CUDA_HOME"):
        nvcc = Path(os.environ["CUDA_HOME"]) / "bin" / "nvcc"
        if os.access(nvcc, os.X_OK):
            return
        raise CannotBuild(
            f"{torch.describe()} is a CUDA build: compiling against it needs {wanted}, and "
            f"CUDA_HOME={os.environ['CUDA_HOME']} has no bin/nvcc: set CUDA_HOME to the "
            "toolkit's folder (a cluster: `module load cuda`)")
    if os.access("/usr/local/cuda/bin/nvcc", os.X_OK) or shutil.which("nvcc"):
        return
    raise CannotBuild(
        f"{torch.describe()} is a CUDA build: compiling against it needs {wanted}, and there is "
        "none (no CUDA_HOME, no /usr/local/cuda/bin/nvcc, no nvcc on PATH): set CUDA_HOME to "
        "the toolkit's folder (a cluster: `module load cuda`)")


def parallel_compiles() -> int:
    cpus = len(os.sched_getaffinity(0))
    try:
        with open("/proc/meminfo") as meminfo:
            fields = dict(line.split(":", 1) for line in meminfo)
        available_gib = int(fields["MemAvailable"].split()[0]) // (1024 * 1024)
    except (OSError, KeyError, ValueError):
        return cpus
    return max(1, min(cpus, available_gib // GIB_PER_COMPILE))


class Lock:
    """An exclusive lock on `path` (POSIX record locks, which NFS carries between nodes)."""

    def __init__(self, path: Path, what: str) -> None:
        self.file = open(path, "a+")
        try:
            fcntl.lockf(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EACCES, errno.EAGAIN):
                raise
            self.file.seek(0)
            holder = self.file.read().strip() or "another process"
            say(f"waiting for {holder}, which is building ddprun-train for {what}")
            fcntl.lockf(self.file, fcntl.LOCK_EX)
        self.file.seek(0)
        self.file.truncate()
        self.file.write(f"pid {os.getpid()} on {os.uname().nodename}")
        self.file.flush()

    def release(self) -> None:
        self.file.close()


def run_logged(command: list[str], log, report_progress: bool) -> int:
    log.write("$ " + " ".join(command) + "\n")
    log.flush()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    last_report = time.monotonic()
    for line in process.stdout:
        log.write(line)
        match = re.match(r"\[(\d+)/(\d+)\]", line)
        if report_progress and match and time.monotonic() - last_report >= PROGRESS_EVERY_S:
            say(f"building ddprun-train: step {match.group(1)} of {match.group(2)}")
            last_report = time.monotonic()
    log.flush()  # the caller may read the log's tail next
    return process.wait()


def log_tail(log_path: Path) -> str:
    lines = log_path.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
    return "\n".join("  " + line for line in lines)


class Tools:
    """What the build runs, each checked before anything is compiled."""

    def __init__(self, torch: Torch) -> None:
        self.compiler = check_compiler()
        self.cmake = check_cmake()
        check_nvcc(torch)
        self.ninja = find_tool("ninja")
        self.jobs = parallel_compiles()


def compile_trainer(source: Path, build: Path, log_path: Path, tools: Tools) -> Path:
    configure = [tools.cmake, "-S", str(source), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                 f"-DCMAKE_CXX_COMPILER={tools.compiler}", "-DDDPRUN_TRAINER_ONLY=ON",
                 "-DDDPRUN_PIP_DEPENDENCIES=ON", "-DDDPRUN_WERROR=OFF",
                 f"-DDDPRUN_TORCH_PYTHON={sys.executable}", f"-DPython_EXECUTABLE={sys.executable}"]
    if tools.ninja:
        configure += ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={tools.ninja}"]
    shutil.rmtree(build, ignore_errors=True)  # what an interrupted build left
    with open(log_path, "w") as log:
        if run_logged(configure, log, report_progress=False) != 0:
            raise BuildFailed(f"configuring the build failed; the last lines of {log_path}:\n"
                              + log_tail(log_path))
        command = [tools.cmake, "--build", str(build), "--target", "ddprun-train", "-j",
                   str(tools.jobs)]
        if run_logged(command, log, report_progress=True) != 0:
            raise BuildFailed(f"compiling ddprun-train failed; the last lines of {log_path}:\n"
                              + log_tail(log_path))
    return build / "bin" / "ddprun-train"


def install(built: Path, entry: Path, torch: Torch) -> Path:
    entry.mkdir(exist_ok=True)
    target = entry / "ddprun-train"
    partial = entry / f".ddprun-train.{os.getpid()}"
    shutil.copy2(built, partial)
    os.chmod(partial, 0o755)
    (entry / "build.json").write_text(json.dumps({
        "torch": torch.version, "cuda": torch.cuda, "cxx11_abi": torch.cxx11_abi,
        "torch_path": str(torch.root), "python": sys.executable,
        "built": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, indent=2) + "\n")
    os.replace(partial, target)  # complete or absent, never half
    return target


def find_or_build(source: Path) -> Path:
    torch = Torch()
    check_supported(torch)
    torch.require_library()
    key = cache_key(torch, source)
    root = cache_root()
    target = root / "trainers" / key / "ddprun-train"
    if os.access(target, os.X_OK):
        return target
    trainers = prepare_cache(root)
    lock = Lock(trainers / f"{key}.lock", torch.describe())
    try:
        if os.access(target, os.X_OK):  # built by the process we waited for
            return target
        log_path = trainers / f"{key}.log"
        build = trainers / f"{key}.build"
        tools = Tools(torch)
        # About 4 CPU-minutes of compiles, and a serial precompiled header and link.
        minutes = 1 + math.ceil(4 / tools.jobs)
        say(f"building ddprun-train against {torch.describe()} for this environment, once: "
            f"about {minutes} minutes with {tools.jobs} parallel compile(s); log: {log_path}")
        started = time.monotonic()
        built = compile_trainer(source, build, log_path, tools)
        installed = install(built, trainers / key, torch)
        shutil.rmtree(build, ignore_errors=True)
        say(f"built ddprun-train in {time.monotonic() - started:.0f} s: {installed}")
        return installed
    finally:
        lock.release()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True, type=Path,
                        help="the trainer's source tree (share/ddprun/trainer-source)")
    args = parser.parse_args()
    if not (args.source / "worker-runtime" / "CMakeLists.txt").is_file():
        say(f"error: {args.source} holds no trainer sources (worker-runtime/CMakeLists.txt); "
            "reinstall ddprun")
        return 2
    try:
        print(find_or_build(args.source.resolve()), flush=True)
        return 0
    except CannotBuild as error:
        say(f"error: cannot build ddprun-train: {error}")
        return 2
    except BuildFailed as error:
        say(f"error: {error}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
