# `cmake --install BUILD --prefix P` (GNU install dirs, relative to P):
#   bin/unico                            the CLI (libunico linked statically)
#   lib/libunico.so.X.Y.Z, .so.X, .so    the shared library, soname
#                                        libunico.so.X (X: UNICO_VERSION_MAJOR)
#   lib/libunico.a                       the static library
#   include/unico.h, unico_errors.h      the public headers
#   lib/pkgconfig/unico.pc               `pkg-config --cflags --libs unico`
#   lib/cmake/unico/                     `find_package(unico CONFIG)`: the
#                                        imported target unico::unico
#   share/unico/examples/schema.cql      the example schema of the tour
#   share/man/man1/unico.1, unico-serve.1  the man pages (made by scdoc)
# tests/install_consumer.sh builds a program against such a prefix, with
# pkg-config and with find_package (ctest: install_consumer).
include(CMakePackageConfigHelpers)

install(TARGETS unico_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS unico_shared EXPORT unicoTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS unico_core ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
# Users include unico.h, which includes unico_errors.h beside it.
install(FILES include/unico.h include/unico_errors.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES examples/schema.cql DESTINATION ${CMAKE_INSTALL_DATADIR}/unico/examples)
# The man pages unico(1) and unico-serve(1): scdoc turns their sources
# (docs/man/*.1.scd) into build/man/*.1 as part of ALL, and they install into
# share/man/man1. Without scdoc (scripts/deps.sh installs it) there are no
# pages, and the test man_pages fails saying so.
find_program(UNICO_SCDOC scdoc)
set(UNICO_MAN_PAGES unico.1 unico-serve.1)
set(UNICO_MAN_DIR ${CMAKE_CURRENT_BINARY_DIR}/man)
if(UNICO_SCDOC)
  set(_man_outputs "")
  foreach(_page ${UNICO_MAN_PAGES})
    set(_src ${CMAKE_CURRENT_SOURCE_DIR}/docs/man/${_page}.scd)
    add_custom_command(OUTPUT ${UNICO_MAN_DIR}/${_page}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${UNICO_MAN_DIR}
      COMMAND sh -c "\"$0\" < \"$1\" > \"$2.tmp\" && mv \"$2.tmp\" \"$2\""
              ${UNICO_SCDOC} ${_src} ${UNICO_MAN_DIR}/${_page}
      DEPENDS ${_src}
      COMMENT "scdoc: man page ${_page}"
      VERBATIM)
    list(APPEND _man_outputs ${UNICO_MAN_DIR}/${_page})
  endforeach()
  add_custom_target(man ALL DEPENDS ${_man_outputs})
  install(FILES ${_man_outputs} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
else()
  message(WARNING "scdoc not found: no man pages (scripts/deps.sh installs it)")
endif()

# unico.pc. Cflags is unico's include directory alone: unico.h includes no
# header of the libraries unico links, so their flags (libutf8proc.pc's
# -DUTF8PROC_EXPORTS, libcurl.pc's -I of a multiarch directory) have no
# place in a program that uses unico. That is why they are not named in
# Requires.private, whose modules' Cflags pkg-config adds to --cflags:
# Libs.private lists what a static link needs instead, each module's
# `pkg-config --libs` (Debian: liblmdb-dev, libjansson-dev,
# libutf8proc-dev, zlib1g-dev, libcurl4-openssl-dev, libssl-dev), with
# threads and libm, so `pkg-config --static --libs unico` gives a static
# link's whole list. The prefix is the one installed to (`--prefix` may
# differ from CMAKE_INSTALL_PREFIX at configure time), so the file is made
# in two steps: everything else now, the prefix at install.
set(_flags -pthread -lm)
foreach(_mod LMDB JANSSON UTF8PROC ZLIB CURL LIBSSL LIBCRYPTO)
  list(APPEND _flags ${${_mod}_LDFLAGS})
endforeach()
list(REMOVE_DUPLICATES _flags) # (the same -L of each module)
string(JOIN " " UNICO_PC_LIBS_PRIVATE ${_flags})
foreach(_dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_dir}}")
    set(UNICO_PC_${_dir} "${CMAKE_INSTALL_${_dir}}")
  else()
    set(UNICO_PC_${_dir} "\${prefix}/${CMAKE_INSTALL_${_dir}}")
  endif()
endforeach()
set(UNICO_PC_PREFIX "@UNICO_PC_PREFIX@") # filled in at install time
configure_file(cmake/unico.pc.in ${CMAKE_CURRENT_BINARY_DIR}/unico.pc.in @ONLY)
install(CODE "
  set(UNICO_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  configure_file(\"${CMAKE_CURRENT_BINARY_DIR}/unico.pc.in\"
                 \"${CMAKE_CURRENT_BINARY_DIR}/unico.pc\" @ONLY)")
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/unico.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The CMake package: unicoConfig.cmake, its version file (same major
# version: the soname's) and the exported target unico::unico (the shared
# library; its dependencies are private, so the package needs none).
set(UNICO_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/unico)
install(EXPORT unicoTargets NAMESPACE unico:: DESTINATION ${UNICO_CMAKE_DIR})
configure_package_config_file(cmake/unicoConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/unicoConfig.cmake
  INSTALL_DESTINATION ${UNICO_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/unicoConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/unicoConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/unicoConfigVersion.cmake
  DESTINATION ${UNICO_CMAKE_DIR})
