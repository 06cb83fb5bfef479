# Warnings are errors for project code. Link ddprun::warnings into every project target.
add_library(ddprun_warnings INTERFACE)
add_library(ddprun::warnings ALIAS ddprun_warnings)
target_compile_options(ddprun_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
  -Wunused -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough -Werror)
# GCC 12's flow analysis gives false -Wmaybe-uninitialized and -Wnull-dereference reports inside
# libstdc++ (<regex>, std::function) when the sanitizers instrument the code; the Release build
# keeps both warnings as errors.
if(DDPRUN_SANITIZE)
  target_compile_options(ddprun_warnings INTERFACE -Wno-maybe-uninitialized -Wno-null-dereference)
endif()
