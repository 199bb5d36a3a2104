# SPDX-License-Identifier: Apache-2.0
# `make install` (cmake --install): the CLI and the daemon in bin/, the shim
# in lib/gpuslice/ (where gpuslice looks for it, ../lib/gpuslice from bin/),
# the systemd unit with its paths under the prefix, the docs, the bash
# completion and the man pages. The prefix
# is the one given at install time (cmake --install --prefix), so the unit is
# written then. `make uninstall` removes what this installs.
set(GS_INSTALL_PROGRAMS gpuslice gpusliced)
if(TARGET gpuslice-extender)
  list(APPEND GS_INSTALL_PROGRAMS gpuslice-extender)
endif()
install(TARGETS ${GS_INSTALL_PROGRAMS} RUNTIME DESTINATION bin)
if(TARGET gpuslice_shim)
  install(TARGETS gpuslice_shim LIBRARY DESTINATION lib/gpuslice)
endif()

set(GS_UNIT_SRC ${CMAKE_SOURCE_DIR}/packaging/systemd/gpusliced.service)
set(GS_UNIT_OUT ${CMAKE_BINARY_DIR}/packaging/gpusliced.service)
install(CODE "
  file(READ \"${GS_UNIT_SRC}\" unit)
  string(REPLACE \"/usr/bin/\" \"\${CMAKE_INSTALL_PREFIX}/bin/\" unit \"\${unit}\")
  string(REPLACE \"/usr/share/\" \"\${CMAKE_INSTALL_PREFIX}/share/\" unit \"\${unit}\")
  file(WRITE \"${GS_UNIT_OUT}\" \"\${unit}\")
")
install(FILES ${GS_UNIT_OUT} DESTINATION lib/systemd/system)

file(GLOB GS_INSTALL_DOCS ${CMAKE_SOURCE_DIR}/docs/*.md)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${GS_INSTALL_DOCS} DESTINATION share/doc/gpuslice)

# The bash completion and the man pages, generated from the CLI's option
# tables by scripts/gen-cli-docs (the ctest cli_docs_drift keeps them so).
install(FILES ${CMAKE_SOURCE_DIR}/packaging/completion/gpuslice.bash
        DESTINATION share/bash-completion/completions RENAME gpuslice)
file(GLOB GS_INSTALL_MAN1 CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/docs/man/*.1)
install(FILES ${GS_INSTALL_MAN1} DESTINATION share/man/man1)
