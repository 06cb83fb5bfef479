# Warnings are errors for project code. Link ddprun::warnings into every project target.
# DDPRUN_WERROR=OFF keeps them warnings: for compilers the project is not developed with (the
# GPU check builds with whatever GCC that machine has, and a new release's new warning must not
# stop a measurement).
option(DDPRUN_WERROR "Treat compiler warnings as errors" ON)
add_library(ddprun_warnings INTERFACE)
add_library(ddprun::warnings ALIAS ddprun_warnings)
target_compile_options(ddprun_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
  -Wunused -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough)
if(DDPRUN_WERROR)
  target_compile_options(ddprun_warnings INTERFACE -Werror)
endif()
# GCC 12's flow analysis gives false -Wmaybe-uninitialized and -Wnull-dereference reports inside
# libstdc++ (<regex>, std::function) when the sanitizers instrument the code; the Release build
# keeps both warnings as errors.
if(DDPRUN_SANITIZE)
  target_compile_options(ddprun_warnings INTERFACE -Wno-maybe-uninitialized -Wno-null-dereference)
endif()
