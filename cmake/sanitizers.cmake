# ASan + UBSan for the whole build (CI runs the unit and e2e tests under it).
if(SG_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
    -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# ThreadSanitizer, a build of its own (it cannot share one with ASan): CI
# runs the unit and e2e tests under it too, for the gateway's threads.
if(SG_TSAN)
  if(SG_SANITIZE)
    message(FATAL_ERROR "SG_TSAN and SG_SANITIZE need separate builds")
  endif()
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()
