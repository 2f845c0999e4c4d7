# clients/c/native_client.cmake: the native channel's client side (native_*.c, mem.c, util.c and the op
# table's ops.c) as a static library of its own, for its tests and its benchmark, until libsegops
# builds these files into itself.
add_library(segops_native_client STATIC
  ${CMAKE_CURRENT_LIST_DIR}/src/native_conn.c ${CMAKE_CURRENT_LIST_DIR}/src/native_place.c
  ${CMAKE_CURRENT_LIST_DIR}/src/native_submit.c ${CMAKE_CURRENT_LIST_DIR}/src/native_orphans.c
  ${CMAKE_CURRENT_LIST_DIR}/src/mem.c ${CMAKE_CURRENT_LIST_DIR}/src/util.c
  ${CMAKE_CURRENT_LIST_DIR}/src/call_check.c ${PROJECT_SOURCE_DIR}/core/ops.c)
target_include_directories(segops_native_client PUBLIC ${CMAKE_CURRENT_LIST_DIR}/include ${CMAKE_CURRENT_LIST_DIR}/src
                                                       ${PROJECT_SOURCE_DIR}/proto ${PROJECT_SOURCE_DIR}/core)
target_link_libraries(segops_native_client PUBLIC Threads::Threads)
