# The compiler of the portable wheel (pyproject.toml names this file on Linux x86_64): zig, from
# PyPI's ziglang package, compiling C++ for <arch>-linux-gnu.<DDPRUN_ZIG_GLIBC>. zig links against
# its own stubs of that glibc release, so no symbol newer than 2.28 can reach the binaries (a
# native Debian 12 build needs 2.34-2.36), and it links LLVM's libc++ statically: ddprun and
# ddprun-store run on any Linux with glibc >= 2.28 (manylinux_2_28: RHEL 8, Debian 10, Ubuntu
# 18.10 and newer) and map nothing but libc. It also brings its own linker and archiver, so the
# build machine needs no compiler or binutils at all.
#
# zig is found through the Python that builds the wheel (Python_EXECUTABLE, which
# scikit-build-core sets, else python3 on PATH), or given as -DDDPRUN_ZIG=/path/to/zig.
# zig caches its libc++ build per user ($ZIG_GLOBAL_CACHE_DIR, else ~/.cache/zig): the first
# build on a machine spends about a minute of CPU on it.

set(DDPRUN_ZIG_GLIBC "2.28" CACHE STRING "Oldest glibc the zig-built binaries run on")

if(NOT DDPRUN_ZIG)
  if(Python_EXECUTABLE)
    set(ddprun_zig_python "${Python_EXECUTABLE}")
  else()
    find_program(ddprun_zig_python NAMES python3 python REQUIRED)
  endif()
  execute_process(
    COMMAND "${ddprun_zig_python}" -c
            "import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), 'zig'))"
    OUTPUT_VARIABLE ddprun_zig_found
    OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE ddprun_zig_failed
    ERROR_QUIET)
  if(ddprun_zig_failed OR NOT EXISTS "${ddprun_zig_found}")
    message(FATAL_ERROR "zig-toolchain.cmake: ${ddprun_zig_python} has no ziglang package; "
                        "pip install ziglang there, or pass -DDDPRUN_ZIG=/path/to/zig")
  endif()
  set(DDPRUN_ZIG "${ddprun_zig_found}" CACHE FILEPATH "zig (PyPI's ziglang) for the portable build")
endif()

# CMake wants one executable per tool, zig is one executable with subcommands: a small script for
# each, written once into the build tree. CMake's own checks (try_compile) re-read this file in a
# scratch project: they get the zig and the scripts of the first run through
# CMAKE_TRY_COMPILE_PLATFORM_VARIABLES.
if(NOT DDPRUN_ZIG_WRAPPERS)
  string(TOLOWER "${CMAKE_HOST_SYSTEM_PROCESSOR}" ddprun_zig_arch)
  set(ddprun_zig_target "${ddprun_zig_arch}-linux-gnu.${DDPRUN_ZIG_GLIBC}")
  set(DDPRUN_ZIG_WRAPPERS "${CMAKE_BINARY_DIR}/zig-tools" CACHE PATH "zig's per-tool scripts")
  # zig builds its C++ runtime (libc++, libc++abi, libunwind) from source, about a CPU-minute on
  # one core, once for each optimization mode and strip setting it links with. So nothing links
  # while CMake configures (its checks would have zig build an unoptimized runtime that nothing
  # ships, one core busy and the other idle): the compiler's identification only compiles, and
  # so do the checks (CMAKE_TRY_COMPILE_TARGET_TYPE below). The runtime is built once, at the
  # first link of the build, beside the other compiles: every command starts at -O3 (the
  # build's own later flags still decide what is compiled) and every link is stripped, as the
  # package's programs are (cmake/DdprunPackage.cmake).
  set(ddprun_zig_cxx "'${DDPRUN_ZIG}' c++ -target ${ddprun_zig_target} -O3")
  file(WRITE "${DDPRUN_ZIG_WRAPPERS}/zig-c++"
       "#!/bin/sh\ncase \" $* \" in\n"
       "  *' -c '*) exec ${ddprun_zig_cxx} \"$@\" ;;\n"
       "  *CMakeCXXCompilerId.cpp*) exec ${ddprun_zig_cxx} -c \"$@\" ;;\n"
       "esac\nexec ${ddprun_zig_cxx} -s \"$@\"\n")
  foreach(tool ar ranlib)
    file(WRITE "${DDPRUN_ZIG_WRAPPERS}/zig-${tool}" "#!/bin/sh\nexec '${DDPRUN_ZIG}' ${tool} \"$@\"\n")
  endforeach()
  foreach(name c++ ar ranlib)
    file(CHMOD "${DDPRUN_ZIG_WRAPPERS}/zig-${name}" PERMISSIONS OWNER_READ OWNER_WRITE
         OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
  endforeach()
endif()
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES DDPRUN_ZIG DDPRUN_ZIG_GLIBC DDPRUN_ZIG_WRAPPERS)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

set(CMAKE_CXX_COMPILER "${DDPRUN_ZIG_WRAPPERS}/zig-c++")
set(CMAKE_AR "${DDPRUN_ZIG_WRAPPERS}/zig-ar" CACHE FILEPATH "zig ar" FORCE)
set(CMAKE_RANLIB "${DDPRUN_ZIG_WRAPPERS}/zig-ranlib" CACHE FILEPATH "zig ranlib" FORCE)
