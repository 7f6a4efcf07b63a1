# ctest package_consumer: `cmake --install` this build into a scratch prefix, then configure, build
# and run examples/consumer against the installed package, as an outside project would.
#   cmake -DGLASS_BUILD_DIR=... -DGLASS_CONSUMER_SOURCE=... -DGLASS_SCRATCH=...
#         -DCMAKE_CXX_COMPILER=... -DCMAKE_BUILD_TYPE=... -P test_consumer.cmake
file(REMOVE_RECURSE ${GLASS_SCRATCH})
set(prefix ${GLASS_SCRATCH}/prefix)

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "package_consumer: ${what} failed (${rc}):\n${out}")
  endif()
  message(STATUS "package_consumer: ${what}: ok")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

step("cmake --install" ${CMAKE_COMMAND} --install ${GLASS_BUILD_DIR} --prefix ${prefix})
foreach(file lib/cmake/glass/glassConfig.cmake include/glass/nn/gpt.h)
  if(NOT EXISTS ${prefix}/${file})
    message(FATAL_ERROR "package_consumer: the install has no ${file}")
  endif()
endforeach()
# Only the installed package: CMAKE_PREFIX_PATH points at it, and the source tree is nowhere on
# the include path.
step("configure the consumer" ${CMAKE_COMMAND} -S ${GLASS_CONSUMER_SOURCE}
  -B ${GLASS_SCRATCH}/build -DCMAKE_PREFIX_PATH=${prefix}
  -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER} -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE})
step("build the consumer" ${CMAKE_COMMAND} --build ${GLASS_SCRATCH}/build)
step("run the consumer" ${GLASS_SCRATCH}/build/consumer)
message("${step_output}")
if(NOT step_output MATCHES "step 5 loss")
  message(FATAL_ERROR "package_consumer: the consumer did not train 5 steps:\n${step_output}")
endif()
file(REMOVE_RECURSE ${GLASS_SCRATCH})  # the install is ~300 MB in a sanitizer build
