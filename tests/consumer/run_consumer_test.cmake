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
# The installed headers are the public API only: the structures, the pair
# pipeline, the scenes and the oracle stay in the build tree.
set(installed_headers "")
file(GLOB_RECURSE installed_headers RELATIVE ${prefix}/include ${prefix}/include/*.h)
foreach(header IN LISTS installed_headers)
  if(header MATCHES "/(bvh|bvh_node|bvh_stack|sweep_grid|sweep_cell_map|pair_buffer|pair_router|pair_budget|brute_force|scene)\\.h$")
    message(FATAL_ERROR "internal header installed: include/${header}")
  endif()
endforeach()
list(FIND installed_headers "broadphase/broad_phase.h" found)
if(found EQUAL -1)
  message(FATAL_ERROR "broadphase/broad_phase.h is not installed")
endif()
# The consumers compile through ccache too when the build does (BP_CCACHE is
# its path then): their sources and the scratch prefix keep their paths from
# one run to the next.
# ccache hashes the preprocessed source for them (CCACHE_NODIRECT), not the
# header paths it once saw: find_package resolves the prefix through links,
# so a clone reached through .ci/run's link can name another clone's
# installed headers in ccache's manifest, and while that clone's old headers
# still exist, direct mode would hand back an object built against them.
set(launcher "")
if(BP_CCACHE)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${BP_CCACHE})
  set(ENV{CCACHE_NODIRECT} 1)
endif()
foreach(project IN ITEMS ${BP_CONSUMER_DIR} ${BP_EXAMPLES_DIR})
  get_filename_component(name ${project} NAME)
  set(build ${BP_WORK_DIR}/build-${name})
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${project} -B ${build}
                          -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=${BP_BUILD_TYPE}
                          ${launcher}
                  RESULT_VARIABLE rc OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "configuring ${name} against the installed package failed: ${rc}")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${build} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "building ${name} against the installed package failed: ${rc}")
  endif()
endforeach()
foreach(consumer IN ITEMS consumer consumer_noexc)
  execute_process(COMMAND ${BP_WORK_DIR}/build-consumer/${consumer} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the ${consumer} failed: ${rc}")
  endif()
endforeach()
execute_process(COMMAND ${BP_WORK_DIR}/build-examples/falling_bodies --frames 60 RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the installed-package example failed: ${rc}")
endif()
# The Bullet plug-in's example, where the package was built with Bullet (its
# component installed), against the installed broadphase::bullet.
if(EXISTS ${prefix}/lib/cmake/broadphase/broadphaseBulletTargets.cmake OR
   EXISTS ${prefix}/lib64/cmake/broadphase/broadphaseBulletTargets.cmake)
  if(NOT EXISTS ${BP_WORK_DIR}/build-examples/bullet_world)
    message(FATAL_ERROR "the package has broadphase::bullet but bullet_world was not built")
  endif()
  execute_process(COMMAND ${BP_WORK_DIR}/build-examples/bullet_world --steps 60 RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the installed-package Bullet example failed: ${rc}")
  endif()
endif()
