# Installs the library, its headers, a CMake package and a pkg-config file, so other projects can
#   find_package(convjit) + target_link_libraries(app convjit::convjit)   or
#   pkg-config --cflags --libs convjit
# Nothing installed names the build or source directory: the CMake package and the pkg-config
# file locate the prefix from where they are installed.
include(CMakePackageConfigHelpers)

install(TARGETS ${CONVJIT_LIBRARY_TARGET} EXPORT convjitTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/convjit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  PATTERN "*.in" EXCLUDE)
install(FILES ${CONVJIT_GENERATED_INCLUDE_DIR}/convjit/version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/convjit)
install(EXPORT convjitTargets NAMESPACE convjit:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/convjit)
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/convjit)

configure_package_config_file(cmake/convjitConfig.cmake.in
  ${PROJECT_BINARY_DIR}/convjitConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/convjit)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/convjitConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/convjitConfig.cmake ${PROJECT_BINARY_DIR}/convjitConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/convjit)

# pkg-config: the prefix is found relative to the .pc file (${pcfiledir}), so a prefix can move.
file(RELATIVE_PATH CONVJIT_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
set(CONVJIT_PC_DL "")
foreach(lib IN LISTS CMAKE_DL_LIBS)
  string(APPEND CONVJIT_PC_DL " -l${lib}")
endforeach()
if(CONVJIT_STATIC)
  # A static archive brings its own dependencies: C++ runtime, threads, dlopen.
  set(CONVJIT_PC_LIBS "-L\${libdir} -lconvjit -lstdc++ -lm -lpthread${CONVJIT_PC_DL}")
  set(CONVJIT_PC_LIBS_PRIVATE "")
else()
  set(CONVJIT_PC_LIBS "-L\${libdir} -lconvjit")
  set(CONVJIT_PC_LIBS_PRIVATE "-lpthread${CONVJIT_PC_DL}")
endif()
configure_file(cmake/convjit.pc.in ${PROJECT_BINARY_DIR}/convjit.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/convjit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The build tree is a package too: -Dconvjit_DIR=<build dir>.
export(EXPORT convjitTargets NAMESPACE convjit:: FILE ${PROJECT_BINARY_DIR}/convjitTargets.cmake)
