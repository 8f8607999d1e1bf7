# Installs the build tree into a scratch prefix and builds tests/consumer
# against it, then checks no header landed outside include/broadphase/.
file(REMOVE_RECURSE ${BP_WORK_DIR})
set(prefix ${BP_WORK_DIR}/prefix)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BP_BINARY_DIR} --prefix ${prefix}
                        --config ${BP_BUILD_TYPE}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()
file(GLOB top_level RELATIVE ${prefix}/include ${prefix}/include/*)
if(NOT top_level STREQUAL "broadphase")
  message(FATAL_ERROR "installed include/ holds '${top_level}', expected only 'broadphase'")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${BP_CONSUMER_DIR} -B ${BP_WORK_DIR}/build
                        -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=${BP_BUILD_TYPE}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the consumer failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BP_WORK_DIR}/build RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the consumer failed: ${rc}")
endif()
execute_process(COMMAND ${BP_WORK_DIR}/build/consumer RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the consumer failed: ${rc}")
endif()
