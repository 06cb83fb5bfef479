# The dependencies of a build from PyPI packages installed in the Python that runs it, instead of
# the system's (DDPRUN_PIP_DEPENDENCIES):
#   nlohmann-json and boost-headers (header-only; the pip package's build requirements), as the
#       targets nlohmann_json::nlohmann_json and Boost::headers: neither ships a CMake package;
#   cmeel-yaml-cpp (ddprun-train's YAML configuration; a dependency of the pip package, which
#       builds the trainer against the user's torch on first use): its CMake package lies under
#       site-packages/cmeel.prefix, added to CMAKE_PREFIX_PATH.
# The packages are looked up without importing them (nlohmann_json's __init__ imports
# importlib_resources).

find_package(Python 3.10 REQUIRED COMPONENTS Interpreter)

# Sets <out> to <package>/include in the build Python's site-packages; a clear error without it.
function(ddprun_pip_include_dir out package header)
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c
            "import importlib.util, os, sys; s = importlib.util.find_spec(sys.argv[1]); print(os.path.join(list(s.submodule_search_locations)[0], 'include') if s else '')"
            "${package}"
    OUTPUT_VARIABLE dir
    OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE failed)
  if(failed OR NOT EXISTS "${dir}/${header}")
    message(FATAL_ERROR "DDPRUN_PIP_DEPENDENCIES: ${Python_EXECUTABLE} has no PyPI package "
                        "'${package}' with ${header}; pip install it (pyproject.toml lists it)")
  endif()
  set(${out} "${dir}" PARENT_SCOPE)
endfunction()

ddprun_pip_include_dir(ddprun_nlohmann_include nlohmann_json nlohmann/json.hpp)
message(STATUS "nlohmann/json from ${ddprun_nlohmann_include}")
# SYSTEM: warnings inside third-party headers are theirs, not errors of this project.
add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
target_include_directories(nlohmann_json::nlohmann_json SYSTEM INTERFACE
                           "${ddprun_nlohmann_include}")

if(DDPRUN_TRAINER_ONLY)
  # cmeel's packages install into site-packages/cmeel.prefix (a prefix with lib/cmake).
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c
            "import sysconfig; print(sysconfig.get_paths()['platlib'] + '/cmeel.prefix')"
    OUTPUT_VARIABLE ddprun_cmeel_prefix OUTPUT_STRIP_TRAILING_WHITESPACE)
  list(APPEND CMAKE_PREFIX_PATH "${ddprun_cmeel_prefix}")
else()
  ddprun_pip_include_dir(ddprun_boost_include boost_headers boost/version.hpp)
  message(STATUS "Boost headers from ${ddprun_boost_include}")
  add_library(Boost::headers INTERFACE IMPORTED)
  target_include_directories(Boost::headers SYSTEM INTERFACE "${ddprun_boost_include}")
endif()
