# The installable library, convjit::convjit: libconvjit.so built from the whole internal archive
# with a version script (only the public API exported), or, with -DCONVJIT_STATIC=ON, the archive
# itself as libconvjit.a for embedding (its objects are compiled with hidden visibility too, so a
# shared object that embeds it exports nothing of convjit's unless it says so).
if(CONVJIT_STATIC)
  set_target_properties(convjit PROPERTIES OUTPUT_NAME convjit EXPORT_NAME convjit)
  set(CONVJIT_LIBRARY_TARGET convjit)
else()
  # A shared library needs a source of its own; everything else comes from the archive.
  set(CONVJIT_SHARED_STUB ${PROJECT_BINARY_DIR}/generated/shared_library.cpp)
  file(WRITE ${CONVJIT_SHARED_STUB}.in
    "// Generated: libconvjit.so is the whole internal archive; this unit is intentionally empty.\n")
  configure_file(${CONVJIT_SHARED_STUB}.in ${CONVJIT_SHARED_STUB} COPYONLY)
  add_library(convjit_shared SHARED ${CONVJIT_SHARED_STUB})
  target_link_libraries(convjit_shared PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,convjit>")
  target_link_libraries(convjit_shared INTERFACE Threads::Threads)
  target_include_directories(convjit_shared INTERFACE
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${CONVJIT_GENERATED_INCLUDE_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  set(CONVJIT_VERSION_SCRIPT ${PROJECT_SOURCE_DIR}/cmake/convjit.map)
  target_link_options(convjit_shared PRIVATE -Wl,--version-script=${CONVJIT_VERSION_SCRIPT})
  if(NOT CONVJIT_SANITIZE)
    # Every symbol resolved at link time (a sanitizer's runtime is the executable's, with clang).
    target_link_options(convjit_shared PRIVATE -Wl,--no-undefined)
  endif()
  set_target_properties(convjit_shared PROPERTIES
    OUTPUT_NAME convjit EXPORT_NAME convjit
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
    LINK_DEPENDS ${CONVJIT_VERSION_SCRIPT})
  set(CONVJIT_LIBRARY_TARGET convjit_shared)
endif()
# The public headers are C++17: consumers (TensorFlow's custom ops among them) need no more.
target_compile_features(${CONVJIT_LIBRARY_TARGET} INTERFACE cxx_std_17)
add_library(convjit::convjit ALIAS ${CONVJIT_LIBRARY_TARGET})
