# glass_test_suite(<name> <dir> <libraries>...): one GoogleTest executable <name> of the .cpp files
# of <dir> (relative to the calling CMakeLists.txt), linked to <libraries>, each of its tests a ctest
# of its own. Used by tests/ and emucuda/tests.
find_package(GTest REQUIRED)
include(GoogleTest)

function(glass_test_suite name dir)
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${dir}/*.cpp)
  if(NOT srcs)
    return()
  endif()
  add_executable(${name} ${srcs})
  # A suite's files compiled a few at a time as one translation unit: each test file is mostly
  # GoogleTest's and glass's headers (~4 s of a ~7 s compile under the sanitizers), so batching
  # them takes minutes off CI's build. Names local to a test file must therefore differ across its
  # suite's files.
  glass_unity_build(${name})
  glass_driver_code(${name})
  target_link_libraries(${name} PRIVATE ${ARGN} GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    GLASS_SOURCE_DIR="${glass_SOURCE_DIR}" GLASS_BINARY_DIR="${glass_BINARY_DIR}")
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2")
endfunction()
