# SPDX-License-Identifier: Apache-2.0
# gs_test(NAME name SOURCES a.c ... [LIBS l ...] [ENV K=V ...] [TIMEOUT s]
#         [LABELS l ...] [ARGS ...] [COMMAND cmd ...])
# Builds one test executable (unless COMMAND is given) and registers it as
# one ctest entry. Exit code 77 means skipped.
function(gs_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT;WORKING_DIRECTORY"
                        "SOURCES;LIBS;ENV;LABELS;ARGS;COMMAND;INCLUDES" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 60)
  endif()
  if(T_SOURCES)
    add_executable(${T_NAME} ${T_SOURCES})
    target_link_libraries(${T_NAME} PRIVATE ${T_LIBS})
    target_include_directories(${T_NAME} PRIVATE ${T_INCLUDES})
  endif()
  if(T_COMMAND)
    add_test(NAME ${T_NAME} COMMAND ${T_COMMAND} ${T_ARGS})
  else()
    add_test(NAME ${T_NAME} COMMAND ${T_NAME} ${T_ARGS})
  endif()
  if(NOT T_WORKING_DIRECTORY)
    set(T_WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  endif()
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT}
    SKIP_RETURN_CODE 77 WORKING_DIRECTORY ${T_WORKING_DIRECTORY})
  if(T_ENV)
    set_tests_properties(${T_NAME} PROPERTIES ENVIRONMENT "${T_ENV}")
  endif()
  if(T_LABELS)
    set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()
