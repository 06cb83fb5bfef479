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


# ddprun-train is not in the wheel (it links LibTorch, and the user's torch is theirs): its
# sources and the script that builds them against the environment's torch on first use go to
# <prefix>/share/ddprun, where `ddprun ... train` finds them beside its bin/
# (launcher/bundled_trainer.hpp, worker-runtime/build_against_torch.py).
if(DEFINED SKBUILD_DATA_DIR)
  set(ddprun_package_sharedir "${SKBUILD_DATA_DIR}/share/ddprun")
else()
  set(ddprun_package_sharedir share/ddprun)
endif()
install(PROGRAMS worker-runtime/build_against_torch.py DESTINATION "${ddprun_package_sharedir}")
set(ddprun_trainer_source "${ddprun_package_sharedir}/trainer-source")
install(FILES CMakeLists.txt DESTINATION "${ddprun_trainer_source}")
install(DIRECTORY cmake worker-runtime DESTINATION "${ddprun_trainer_source}"
        PATTERN build_against_torch.py EXCLUDE PATTERN __pycache__ EXCLUDE)
