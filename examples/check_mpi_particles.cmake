# Runs mpi_particles on 1 and on 3 ranks: both must finish and print the same
# checksum of the final positions (the run does not depend on the rank count).
# Arguments: -DMPIEXEC, -DNP_FLAG, -DFLAGS (a list), -DEXAMPLE.
set(args --particles 1500 --frames 150)
foreach(np 1 3)
  execute_process(COMMAND ${MPIEXEC} ${NP_FLAG} ${np} ${FLAGS} ${EXAMPLE} ${args}
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  message(STATUS "${np} ranks:\n${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "mpi_particles on ${np} ranks failed (${rc}):\n${err}")
  endif()
  if(NOT out MATCHES "checksum ([0-9a-f]+)")
    message(FATAL_ERROR "mpi_particles on ${np} ranks printed no checksum")
  endif()
  set(sum_${np} ${CMAKE_MATCH_1})
endforeach()
if(NOT sum_1 STREQUAL sum_3)
  message(FATAL_ERROR "1 rank ends at checksum ${sum_1}, 3 ranks at ${sum_3}")
endif()
