# SPDX-License-Identifier: MIT
# Run after each engine test program is built (POST_BUILD):
#   cmake -D PROG=<program> -D OUT=<file.cmake> -P discover.cmake
# asks the program for its scenarios (`PROG --list`, the table in its .c
# file) and writes one ctest test per scenario into OUT, which ctest reads
# through the directory's TEST_INCLUDE_FILES.  So a scenario is listed
# only in its table.
execute_process(COMMAND ${PROG} --list
  OUTPUT_VARIABLE names RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROG} --list failed (${rc})")
endif()
string(REGEX REPLACE "\n$" "" names "${names}")
string(REPLACE "\n" ";" names "${names}")
set(text "")
foreach(name IN LISTS names)
  string(APPEND text
    "add_test(engine.${name} [==[${PROG}]==] ${name})\n"
    "set_tests_properties(engine.${name} PROPERTIES LABELS engine TIMEOUT 60"
    " ENVIRONMENT UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1)\n")
endforeach()
file(WRITE ${OUT}.new "${text}")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}.new ${OUT})
