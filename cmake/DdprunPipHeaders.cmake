# The header-only dependencies of the pip build, from PyPI packages installed in the Python that
# builds the wheel (pyproject.toml's build requirements): nlohmann-json and boost-headers. Neither
# ships a CMake package, so this makes the targets the rest of the tree links,
# nlohmann_json::nlohmann_json and Boost::headers, from their include folders. It looks the
# packages up without importing them (nlohmann_json's __init__ imports importlib_resources).

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
    message(FATAL_ERROR "DDPRUN_PACKAGE: ${Python_EXECUTABLE} has no PyPI package '${package}' "
                        "with ${header}; pip install the build requirements of pyproject.toml")
  endif()
  set(${out} "${dir}" PARENT_SCOPE)
endfunction()

ddprun_pip_include_dir(ddprun_nlohmann_include nlohmann_json nlohmann/json.hpp)
ddprun_pip_include_dir(ddprun_boost_include boost_headers boost/version.hpp)
message(STATUS "nlohmann/json from ${ddprun_nlohmann_include}")
message(STATUS "Boost headers from ${ddprun_boost_include}")

# SYSTEM: warnings inside third-party headers are theirs, not errors of this project.
add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
target_include_directories(nlohmann_json::nlohmann_json SYSTEM INTERFACE
                           "${ddprun_nlohmann_include}")
add_library(Boost::headers INTERFACE IMPORTED)
target_include_directories(Boost::headers SYSTEM INTERFACE "${ddprun_boost_include}")
