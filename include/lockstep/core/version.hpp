// lockstep's version, written here and nowhere else: CMakeLists.txt and
// conanfile.py read these three lines, and a test checks that the literal in
// ports/lockstep/vcpkg.json (which cannot read a file) matches them.
#pragma once

#define LOCKSTEP_VERSION_MAJOR 0
#define LOCKSTEP_VERSION_MINOR 2
#define LOCKSTEP_VERSION_PATCH 0

// For #if tests: 0.2.0 is 200, 1.12.3 is 11203.
#define LOCKSTEP_VERSION (LOCKSTEP_VERSION_MAJOR * 10000 + LOCKSTEP_VERSION_MINOR * 100 + LOCKSTEP_VERSION_PATCH)

#define LOCKSTEP_DETAIL_STRINGIZE_VALUE(x) #x
#define LOCKSTEP_DETAIL_STRINGIZE(x) LOCKSTEP_DETAIL_STRINGIZE_VALUE(x)
// "0.2.0", made from the three numbers above so that it cannot disagree with them.
#define LOCKSTEP_VERSION_STRING                                                    \
  LOCKSTEP_DETAIL_STRINGIZE(LOCKSTEP_VERSION_MAJOR)                                \
  "." LOCKSTEP_DETAIL_STRINGIZE(LOCKSTEP_VERSION_MINOR) "." LOCKSTEP_DETAIL_STRINGIZE(LOCKSTEP_VERSION_PATCH)
