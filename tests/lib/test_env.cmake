# SPDX-License-Identifier: MIT
#
# The environment for tests that run programs over our libibverbs.so.1.
# include() it from any tests/*/CMakeLists.txt; it defines:
#
#   UROCE_TEST_LIBDIR  where our libibverbs.so.1 is built
#   UROCE_TEST_PRELOAD the sanitizer runtime an uninstrumented program must
#                      LD_PRELOAD to load our sanitized library ("" if none)
#   UROCE_TEST_ENV     a list for set_tests_properties(... ENVIRONMENT ...)
#
# Why the preload: a library built with -fsanitize=address (or thread) needs
# its runtime to be the first object in the process.  Our own test binaries
# are instrumented and link it themselves; Debian's ibv_rc_pingpong,
# perftest, python3 and so on are not, so the runtime is preloaded into
# them (tests/lib/uroce_test.sh does that only for the program under test,
# not for bash, ss or grep).  UBSan alone needs no preload.
include_guard(DIRECTORY)

set(UROCE_TEST_LIBDIR ${CMAKE_BINARY_DIR}/lib)
set(UROCE_TEST_PRELOAD "")

function(uroce_sanitizer_runtime out gcc_name clang_name)
  if(CMAKE_C_COMPILER_ID STREQUAL "GNU")
    set(name ${gcc_name})
  else()
    set(name ${clang_name}-${CMAKE_SYSTEM_PROCESSOR}.so)
  endif()
  execute_process(
    COMMAND ${CMAKE_C_COMPILER} -print-file-name=${name}
    OUTPUT_VARIABLE path OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT IS_ABSOLUTE "${path}" OR NOT EXISTS "${path}")
    message(FATAL_ERROR "cannot find the sanitizer runtime ${name} "
                        "(${CMAKE_C_COMPILER} -print-file-name gave '${path}')")
  endif()
  get_filename_component(path "${path}" REALPATH)
  set(${out} ${path} PARENT_SCOPE)
endfunction()

if(UROCE_SANITIZE MATCHES "address")
  uroce_sanitizer_runtime(UROCE_TEST_PRELOAD libasan.so libclang_rt.asan)
elseif(UROCE_SANITIZE MATCHES "thread")
  uroce_sanitizer_runtime(UROCE_TEST_PRELOAD libtsan.so libclang_rt.tsan)
endif()

set(UROCE_TEST_ENV
  "UROCE_LIBDIR=${UROCE_TEST_LIBDIR}"
  "UROCE_PRELOAD=${UROCE_TEST_PRELOAD}"
  "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"
  "TSAN_OPTIONS=halt_on_error=1:suppressions=${PROJECT_SOURCE_DIR}/tests/lib/tsan.supp")
