# Finds the LibTorch that ddprun-train and the LibTorch tests build against, once, for the whole
# tree, and defines ddprun::torch (link it instead of `torch`).
#
# Where torch comes from (README, "Building against PyTorch"):
#   DDPRUN_TORCH_PYTHON (top-level CMakeLists.txt): a Python whose `torch` package (a pip wheel)
#       to build against, asked for torch.utils.cmake_prefix_path; default the project's .venv
#       made by scripts/install-deps.sh (PyTorch 2.13.0, CPU).
#   DDPRUN_TORCH_PYTHON="" with Torch_DIR=<libtorch>/share/cmake/Torch: any other LibTorch 2.x.
# A CUDA build of torch is found the same way; PyTorch's CMake files then need a CUDA toolkit with
# nvcc (CUDA_HOME, else /usr/local/cuda, else nvcc on PATH), and CUDA's library headers (cuBLAS,
# cuSPARSE, cuSOLVER, NCCL) come from the nvidia-* wheels installed beside torch when the toolkit
# lacks them.
#
# Gloo: ProcessGroupGloo.hpp includes <gloo/...>, which pip wheels do not ship (PyTorch builds
# Gloo statically into libtorch_cpu and does not install its headers) and PyPI has no package of.
# worker-runtime/gloo_declarations declares the few names that header mentions; ddprun-train
# never uses a Gloo class itself, so every Gloo symbol it reaches is torch's own (README there).
include_guard(GLOBAL)

# Imported targets of torch visible in every folder (tests and benchmarks link them too).
set(CMAKE_FIND_PACKAGE_TARGETS_GLOBAL ON)

if(DDPRUN_TORCH_PYTHON)
  execute_process(
    COMMAND "${DDPRUN_TORCH_PYTHON}" -c
            "import torch, torch.utils; print(torch.utils.cmake_prefix_path); print(torch.version.cuda or '')"
    OUTPUT_VARIABLE torch_facts OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_VARIABLE torch_error RESULT_VARIABLE torch_status)
  if(NOT torch_status EQUAL 0)
    message(FATAL_ERROR
      "ddprun: cannot import torch with DDPRUN_TORCH_PYTHON=${DDPRUN_TORCH_PYTHON}:\n${torch_error}\n"
      "Run scripts/install-deps.sh (it makes .venv), point DDPRUN_TORCH_PYTHON at another Python "
      "with torch, or configure with -DDDPRUN_TORCH_PYTHON= -DTorch_DIR=<libtorch>/share/cmake/Torch.")
  endif()
  string(REPLACE "\n" ";" torch_facts "${torch_facts}")
  list(GET torch_facts 0 torch_cmake_prefix)
  list(LENGTH torch_facts torch_fact_count)
  set(DDPRUN_TORCH_CUDA "")
  if(torch_fact_count GREATER 1)
    list(GET torch_facts 1 DDPRUN_TORCH_CUDA)
  endif()
  # A different Python means a different torch: forget what the last configure found.
  if(NOT DDPRUN_TORCH_PYTHON STREQUAL DDPRUN_TORCH_PYTHON_FOUND)
    unset(Torch_DIR CACHE)
    unset(Caffe2_DIR CACHE)
    unset(TORCH_LIBRARY CACHE)
    unset(c10_LIBRARY CACHE)
    unset(C10_CUDA_LIBRARY CACHE)
    set(DDPRUN_TORCH_PYTHON_FOUND "${DDPRUN_TORCH_PYTHON}" CACHE INTERNAL "")
  endif()
  set(Torch_DIR "${torch_cmake_prefix}/Torch" CACHE PATH "LibTorch's CMake package" FORCE)
  get_filename_component(torch_root "${torch_cmake_prefix}/../.." ABSOLUTE)
  # TorchConfig looks these up with find_library, which tries the system folders first: a
  # Debian libtorch-dev would win over the wheel. Pin them to the wheel's own.
  find_library(TORCH_LIBRARY torch PATHS "${torch_root}/lib" NO_DEFAULT_PATH)
  find_library(c10_LIBRARY c10 PATHS "${torch_root}/lib" NO_DEFAULT_PATH)
  find_library(C10_CUDA_LIBRARY c10_cuda PATHS "${torch_root}/lib" NO_DEFAULT_PATH)
  if(DDPRUN_TORCH_CUDA AND NOT CMAKE_CUDA_COMPILER)
    # PyTorch's cuda.cmake runs FindCUDA, which needs the toolkit's root, not a wrapper on PATH.
    if(DEFINED ENV{CUDA_HOME})
      set(cuda_root "$ENV{CUDA_HOME}")
    elseif(EXISTS /usr/local/cuda/bin/nvcc)
      set(cuda_root /usr/local/cuda)
    else()
      find_program(nvcc_on_path nvcc REQUIRED)
      get_filename_component(cuda_root "${nvcc_on_path}" REALPATH)
      get_filename_component(cuda_root "${cuda_root}/../.." ABSOLUTE)
    endif()
    set(CUDA_TOOLKIT_ROOT_DIR "${cuda_root}" CACHE PATH "CUDA toolkit for PyTorch's CMake files")
    set(CMAKE_CUDA_COMPILER "${cuda_root}/bin/nvcc" CACHE FILEPATH "nvcc")
  endif()
  if(DDPRUN_TORCH_CUDA)
    # We compile no CUDA code, but PyTorch's cuda.cmake enables the language: it would take our
    # C++20 (which CMake 3.25 cannot ask of nvcc) and probe the GPUs for architectures (there may
    # be none). Any valid answer will do for both.
    set(CMAKE_CUDA_STANDARD 17)
    if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST} AND NOT TORCH_CUDA_ARCH_LIST)
      set(TORCH_CUDA_ARCH_LIST "9.0")
    endif()
  endif()
endif()

# TorchConfig finds Caffe2Config with find_dependency(PATHS <its folder>), which also tries the
# system folders first (Debian's libtorch-dev 1.13 would win): pin it next to Torch_DIR.
if(Torch_DIR)
  get_filename_component(caffe2_dir "${Torch_DIR}/../Caffe2" ABSOLUTE)
  set(Caffe2_DIR "${caffe2_dir}" CACHE PATH "LibTorch's Caffe2 CMake package" FORCE)
endif()
find_package(Torch REQUIRED)

add_library(ddprun_torch INTERFACE)
add_library(ddprun::torch ALIAS ddprun_torch)
target_link_libraries(ddprun_torch INTERFACE torch)

target_include_directories(ddprun_torch SYSTEM INTERFACE
                           "${CMAKE_CURRENT_LIST_DIR}/../worker-runtime/gloo_declarations")

if(TARGET torch_cuda)
  set(DDPRUN_TORCH_HAS_CUDA ON)
  # cuBLAS, cuSPARSE, cuSOLVER and NCCL headers from the nvidia-* wheels beside torch
  # (site-packages/nvidia/<package>/include): a toolkit made for nvcc alone lacks them. They are
  # the versions torch was built with.
  file(GLOB wheel_cuda_includes LIST_DIRECTORIES true "${TORCH_INSTALL_PREFIX}/../nvidia/*/include")
  target_include_directories(ddprun_torch SYSTEM INTERFACE ${wheel_cuda_includes})
else()
  set(DDPRUN_TORCH_HAS_CUDA OFF)
endif()
message(STATUS "ddprun: LibTorch ${Torch_VERSION} from ${TORCH_INSTALL_PREFIX}"
               " (CUDA: ${DDPRUN_TORCH_HAS_CUDA})")
