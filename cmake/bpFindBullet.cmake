# Finds Bullet 3 for the Bullet plug-in (broadphase::bullet) and gives it as
# one imported target, bpbullet::sdk, with BP_BULLET_FOUND. Used by the build
# and, installed next to broadphaseConfig.cmake, by a consumer of the
# package, so that both name the same target.
#
# pkg-config first (Debian's BulletConfig.cmake has relative include paths),
# then CMake's FindBullet module. Imported targets' include directories are
# SYSTEM: Bullet's headers do not meet our warning flags.
if(TARGET bpbullet::sdk)
  set(BP_BULLET_FOUND ON)
  return()
endif()
set(BP_BULLET_FOUND OFF)
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(BP_BULLET_PC QUIET IMPORTED_TARGET GLOBAL bullet)
  if(BP_BULLET_PC_FOUND)
    add_library(bpbullet::sdk INTERFACE IMPORTED GLOBAL)
    target_link_libraries(bpbullet::sdk INTERFACE PkgConfig::BP_BULLET_PC)
    set(BP_BULLET_FOUND ON)
  endif()
endif()
if(NOT BP_BULLET_FOUND)
  find_package(Bullet MODULE QUIET)
  if(BULLET_FOUND)
    add_library(bpbullet::sdk INTERFACE IMPORTED GLOBAL)
    target_include_directories(bpbullet::sdk INTERFACE ${BULLET_INCLUDE_DIRS})
    target_link_libraries(bpbullet::sdk INTERFACE ${BULLET_LIBRARIES})
    set(BP_BULLET_FOUND ON)
  endif()
endif()
