# Modal's messages, generated at build time by protoc-c from the trimmed
# .proto files in modal/ (Modal's own names and field numbers), into
# sg_modal_proto; include them as "modal.pb-c.h" and "router.pb-c.h".
# The generated code is not ours and is built without our warning flags.
pkg_check_modules(PROTOBUF_C REQUIRED IMPORTED_TARGET libprotobuf-c)
find_program(SG_PROTOC_C protoc-c REQUIRED)

set(SG_MODAL_PROTO_DIR ${CMAKE_BINARY_DIR}/modal-proto)
set(SG_MODAL_PROTO_OUT
  ${SG_MODAL_PROTO_DIR}/modal.pb-c.c ${SG_MODAL_PROTO_DIR}/modal.pb-c.h
  ${SG_MODAL_PROTO_DIR}/router.pb-c.c ${SG_MODAL_PROTO_DIR}/router.pb-c.h)
add_custom_command(
  OUTPUT ${SG_MODAL_PROTO_OUT}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${SG_MODAL_PROTO_DIR}
  COMMAND ${SG_PROTOC_C} --c_out=${SG_MODAL_PROTO_DIR}
          -I ${CMAKE_SOURCE_DIR}/modal modal.proto router.proto
  DEPENDS ${CMAKE_SOURCE_DIR}/modal/modal.proto ${CMAKE_SOURCE_DIR}/modal/router.proto
  COMMENT "protoc-c: Modal's messages"
  VERBATIM)
add_library(sg_modal_proto STATIC
  ${SG_MODAL_PROTO_DIR}/modal.pb-c.c ${SG_MODAL_PROTO_DIR}/router.pb-c.c)
target_include_directories(sg_modal_proto PUBLIC ${SG_MODAL_PROTO_DIR})
target_link_libraries(sg_modal_proto PUBLIC PkgConfig::PROTOBUF_C)
