# ASan+UBSan for the whole tree when DDPRUN_SANITIZE=ON (used by CI for the
# components that do not link LibTorch).
if(DDPRUN_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
