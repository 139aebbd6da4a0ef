# sg-helper: placeholder, replaced by the helper's real build rules.
add_executable(sg-helper adapters/helper/main.c)
target_link_libraries(sg-helper PRIVATE sg_helperlib)
