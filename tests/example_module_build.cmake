# cmake -DBUILD_DIR=<pvc build> -DSOURCE_DIR=<pvc source> -DWORK=<dir> -DCXX=<compiler> -P example_module_build.cmake
#
# What a third party does with the example module: install the SDK (here a
# staged `cmake --install` of this build), then configure and build
# examples/module-hello against it with find_package(pvc-sdk) alone. The
# module lands in <WORK>/build/libpvc-module-hello.so for the tests that load it.
file(REMOVE_RECURSE ${WORK})
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  message(STATUS "$ ${ARGV}\n${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}")
  endif()
endfunction()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK}/stage)
# Nothing of the source tree may be visible: only the staged install.
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/module-hello -B ${WORK}/build
    -DCMAKE_PREFIX_PATH=${WORK}/stage -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=RelWithDebInfo)
run(${CMAKE_COMMAND} --build ${WORK}/build)
if(NOT EXISTS ${WORK}/build/libpvc-module-hello.so)
  message(FATAL_ERROR "the example module was not built: ${WORK}/build/libpvc-module-hello.so")
endif()
