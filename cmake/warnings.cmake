# Warnings every target is built with; SG_WERROR (CI) makes them errors.
function(sg_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow
    -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wvla)
  if(CMAKE_C_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wno-unknown-pragmas)
  endif()
  if(SG_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
