# glass as a CMake package (README, "glass in your own CMake project").
#
#   cmake --install build --prefix P
#
# installs the headers under P/include/glass (the source tree's layout: #include "nn/gpt.h"), the
# libraries under P/lib, and P/lib/cmake/glass/glassConfig.cmake with exported targets:
#   glass::glass     everything (the training library and all the layers below it)
#   glass::engine, glass::kernels, glass::autograd, glass::optim, glass::nn, glass::comm,
#   glass::train     the layers, each bringing the ones below it
# plus the pieces those link (the kernel emulator; the emulated CUDA platform of emucuda/: its
# runtime, cuBLAS and NCCL; the kernel tables),
# exported because the libraries are static. An outside project then does
#   find_package(glass CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE glass::glass)
# (examples/consumer). The package is built for this build's configuration: its devices (emu,
# cuda), MPI, and, in a sanitizer build, the sanitizers, which a consumer then links too.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

add_library(glass INTERFACE)
target_link_libraries(glass INTERFACE glass_train)

set(GLASS_PACKAGE_TARGETS glass)
foreach(target
    glass_engine glass_kernels glass_autograd glass_optim glass_nn glass_comm glass_tokenizer
    glass_train
    glass_mpi glass_emu glass_emu_cudart glass_cuda_runtime_emu glass_emu_cublas glass_emu_nccl
    glass_kernels_emu glass_kernels_cuda glass_comm_nccl_emu
    glass_comm_nccl_cuda)
  if(TARGET ${target})
    list(APPEND GLASS_PACKAGE_TARGETS ${target})
    string(REGEX REPLACE "^glass_" "" export_name ${target})
    set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name})
  endif()
endforeach()
# The sanitizers' runtimes: every program that links an instrumented glass needs them.
if(GLASS_SANITIZE)
  target_link_options(glass_engine INTERFACE
    $<INSTALL_INTERFACE:-fsanitize=address,undefined>)
endif()

install(TARGETS ${GLASS_PACKAGE_TARGETS} EXPORT glassTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  OBJECTS DESTINATION ${CMAKE_INSTALL_LIBDIR}/glass/objects
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/glass)
install(DIRECTORY engine kernels autograd optim nn train comm emucuda
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/glass
  FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh" PATTERN "*.hpp" PATTERN "*.inc"
  PATTERN "emucuda/tests" EXCLUDE)
install(EXPORT glassTargets NAMESPACE glass:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/glass)

# What glassConfig.cmake must find again for the exported targets' dependencies.
set(GLASS_PACKAGE_HAS_EMU ${GLASS_EMU})
set(GLASS_PACKAGE_HAS_CUDA ${GLASS_CUDA})
if(TARGET glass_mpi)
  set(GLASS_PACKAGE_HAS_MPI ON)
else()
  set(GLASS_PACKAGE_HAS_MPI OFF)
endif()
configure_package_config_file(cmake/glassConfig.cmake.in
  ${PROJECT_BINARY_DIR}/glassConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/glass)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/glassConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/glassConfig.cmake ${PROJECT_BINARY_DIR}/glassConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/glass)

# The check that the package works: install this build into a scratch prefix, then configure,
# build and run examples/consumer against it (cmake/test_consumer.cmake).
if(GLASS_BUILD_TESTS)
  add_test(NAME package_consumer COMMAND ${CMAKE_COMMAND}
    -DGLASS_BUILD_DIR=${PROJECT_BINARY_DIR}
    -DGLASS_CONSUMER_SOURCE=${PROJECT_SOURCE_DIR}/examples/consumer
    -DGLASS_SCRATCH=${PROJECT_BINARY_DIR}/package_consumer
    -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}
    -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE}
    -P ${PROJECT_SOURCE_DIR}/cmake/test_consumer.cmake)
  set_tests_properties(package_consumer PROPERTIES TIMEOUT 300 COST 15
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1;OMP_NUM_THREADS=2")
endif()
