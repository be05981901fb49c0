# Find the Check unit-test framework without pkg-config (the device machine has none).
# Hints: CHECK_ROOT (CMake or environment variable), e.g. a prefix where the Debian
# packages were unpacked with dpkg -x (<root>/usr). Defines Check::check.
find_path(CHECK_INCLUDE_DIR check.h
  HINTS ${CHECK_ROOT} $ENV{CHECK_ROOT} PATH_SUFFIXES include usr/include)
find_library(CHECK_LIBRARY NAMES check_pic check
  HINTS ${CHECK_ROOT} $ENV{CHECK_ROOT}
  PATH_SUFFIXES lib lib/x86_64-linux-gnu usr/lib usr/lib/x86_64-linux-gnu)
# Debian builds Check with subunit output: it needs libsubunit (static, so nothing has to
# be installed where the tests run).
find_library(CHECK_SUBUNIT_LIBRARY NAMES libsubunit.a subunit
  HINTS ${CHECK_ROOT} $ENV{CHECK_ROOT}
  PATH_SUFFIXES lib lib/x86_64-linux-gnu usr/lib usr/lib/x86_64-linux-gnu)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Check REQUIRED_VARS CHECK_INCLUDE_DIR CHECK_LIBRARY)

if(Check_FOUND AND NOT TARGET Check::check)
  find_package(Threads REQUIRED)
  add_library(Check::check UNKNOWN IMPORTED)
  set(_deps Threads::Threads m)
  if(CHECK_SUBUNIT_LIBRARY)
    list(PREPEND _deps ${CHECK_SUBUNIT_LIBRARY})
  endif()
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
    list(APPEND _deps rt)
  endif()
  set_target_properties(Check::check PROPERTIES
    IMPORTED_LOCATION ${CHECK_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${CHECK_INCLUDE_DIR}
    INTERFACE_LINK_LIBRARIES "${_deps}")
endif()
