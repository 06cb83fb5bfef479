# What the pip package installs (DDPRUN_PACKAGE, set by pyproject.toml): ddprun and ddprun-store
# into the environment's bin/ (scikit-build-core's SKBUILD_SCRIPTS_DIR; bin/ under
# CMAKE_INSTALL_PREFIX for a plain `cmake --install`). Both are self-contained executables that
# need no Python at run time; the wheel ships no library (no etcd TLS module: DDPRUN_ETCD_TLS).

if(DEFINED SKBUILD_SCRIPTS_DIR)
  set(ddprun_package_bindir "${SKBUILD_SCRIPTS_DIR}")
else()
  set(ddprun_package_bindir bin)
endif()

foreach(program ddprun ddprun-store)
  # -s: no symbol tables in the wheel (a third of each binary); the build is Release.
  target_link_options(${program} PRIVATE -s)
  install(TARGETS ${program} RUNTIME DESTINATION "${ddprun_package_bindir}")
endforeach()

