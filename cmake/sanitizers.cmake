# ASan + UBSan for the whole build (CI runs the unit and e2e tests under it).
if(SG_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
    -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
