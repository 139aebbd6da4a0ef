# sg-helper: the program sandgate runs inside environments.
#
# It travels into remote environments that may have no libc at all, so it
# is built static against musl when musl-gcc is installed (Debian:
# musl-tools).  It lands beside the sandgate executable, which finds it
# there (gateway/main.c find_helper(): $SANDGATE_HELPER, then beside the
# executable, then ../libexec/sandgate/).
#
# musl-gcc puts no kernel headers on its include path, so helper code must
# not need <linux/*.h> under musl; and sanitizers are never passed to it
# (musl has no sanitizer runtime): only the project's warning flags are.
# It is stripped (-s): musl's libc.a brings debug information that was an
# eighth of the bytes every install sends (docs/vercel.md).

find_program(SG_MUSL_GCC musl-gcc)

# The sandgate executable's output directory (CMAKE_BINARY_DIR unless the
# project sets CMAKE_RUNTIME_OUTPUT_DIRECTORY).
if(CMAKE_RUNTIME_OUTPUT_DIRECTORY)
  set(SG_HELPER_DIR ${CMAKE_RUNTIME_OUTPUT_DIRECTORY})
else()
  set(SG_HELPER_DIR ${CMAKE_BINARY_DIR})
endif()

if(SG_MUSL_GCC)
  file(GLOB SG_HELPER_MUSL_SOURCES CONFIGURE_DEPENDS
    ${CMAKE_SOURCE_DIR}/helper/*.c
    ${CMAKE_SOURCE_DIR}/core/path.c
    ${CMAKE_SOURCE_DIR}/base/*.c)
  file(GLOB SG_HELPER_MUSL_HEADERS CONFIGURE_DEPENDS
    ${CMAKE_SOURCE_DIR}/helper/*.h
    ${CMAKE_SOURCE_DIR}/core/path.h
    ${CMAKE_SOURCE_DIR}/adapters/jobreply.h
    ${CMAKE_SOURCE_DIR}/base/*.h)

  # The project's warning flags, as sg_warnings() gave them to the helper's
  # library; everything sanitizer-related is dropped.
  get_target_property(SG_HELPER_MUSL_WARNINGS sg_helperlib COMPILE_OPTIONS)
  if(NOT SG_HELPER_MUSL_WARNINGS)
    set(SG_HELPER_MUSL_WARNINGS "")
  endif()
  list(FILTER SG_HELPER_MUSL_WARNINGS EXCLUDE REGEX "sanitize|omit-frame-pointer")

  # Built in a folder of its own and copied beside sandgate: a custom
  # target may not share its name with the file it produces, or make
  # reports a circular dependency on every build.
  set(SG_HELPER_OUT ${CMAKE_BINARY_DIR}/helper-musl/sg-helper)
  add_custom_command(OUTPUT ${SG_HELPER_OUT}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/helper-musl
    COMMAND ${SG_MUSL_GCC} -static -Os -s -std=c11 -D_POSIX_C_SOURCE=200809L
      ${SG_HELPER_MUSL_WARNINGS} -I${CMAKE_BINARY_DIR} -I${CMAKE_SOURCE_DIR}
      -o ${SG_HELPER_OUT} ${SG_HELPER_MUSL_SOURCES}
    COMMAND ${CMAKE_COMMAND} -E copy_if_different ${SG_HELPER_OUT}
      ${SG_HELPER_DIR}/sg-helper
    DEPENDS ${SG_HELPER_MUSL_SOURCES} ${SG_HELPER_MUSL_HEADERS}
      ${CMAKE_BINARY_DIR}/sg_config.h
    BYPRODUCTS ${SG_HELPER_DIR}/sg-helper
    COMMENT "Building the static sg-helper with musl"
    COMMAND_EXPAND_LISTS
    VERBATIM)
  add_custom_target(sg-helper ALL DEPENDS ${SG_HELPER_OUT})
else()
  message(STATUS "musl-gcc not found: sg-helper is built with the system "
    "compiler and is NOT static (install musl-tools for the static helper)")
  add_executable(sg-helper helper/main.c)
  target_link_libraries(sg-helper PRIVATE sg_helperlib)
  sg_warnings(sg-helper)
  set_target_properties(sg-helper PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${SG_HELPER_DIR})
endif()
