# Included from the top level (a custom command's output only reaches targets of its own
# directory, and the convjit target lives there).
# The interpret mode writes its host prelude (the ABI header, then the prelude) before each
# kernel it builds for the host: embedded as text at build time.
if(CONVJIT_CUDA)
  set(CONVJIT_HOST_PRELUDE_FILES
    ${PROJECT_SOURCE_DIR}/runtime/cuda/interpret/cuda_interpret_abi.h
    ${PROJECT_SOURCE_DIR}/runtime/cuda/interpret/cuda_host_prelude.hpp)
  set(CONVJIT_HOST_PRELUDE_TEXT ${PROJECT_BINARY_DIR}/generated/cuda_host_prelude_text.cpp)
  add_custom_command(
    OUTPUT ${CONVJIT_HOST_PRELUDE_TEXT}
    COMMAND ${CMAKE_COMMAND} "-DFILES=$<JOIN:${CONVJIT_HOST_PRELUDE_FILES},|>"
            -DOUTPUT=${CONVJIT_HOST_PRELUDE_TEXT} -DFUNCTION=host_prelude_text
            -DNAMESPACE=convjit::runtime::interpret
            -P ${PROJECT_SOURCE_DIR}/cmake/EmbedText.cmake
    DEPENDS ${CONVJIT_HOST_PRELUDE_FILES} ${PROJECT_SOURCE_DIR}/cmake/EmbedText.cmake
    COMMENT "Embedding the interpret mode's host prelude"
    VERBATIM)
  target_sources(convjit PRIVATE ${CONVJIT_HOST_PRELUDE_TEXT})
endif()
