# The encoding families that are one unit each: a kernel (src/kernels), a torch
# op (src/nn/ops) and a module whose .cpp ends with the family's descriptor
# (src/nn/modules). Adding such a family adds one line here; src/kernels and
# src/nn take these sources from the two lists. Paths are relative to those folders.
set(POSENC_FAMILY_KERNEL_SOURCES)
set(POSENC_FAMILY_NN_SOURCES)
macro(posenc_family name)
  cmake_parse_arguments(posenc_family "" "KERNEL;OP;MODULE" "" ${ARGN})
  if(NOT posenc_family_KERNEL OR NOT posenc_family_OP OR NOT posenc_family_MODULE)
    message(FATAL_ERROR "posenc_family(${name}) needs KERNEL, OP and MODULE")
  endif()
  list(APPEND POSENC_FAMILY_KERNEL_SOURCES ${posenc_family_KERNEL})
  list(APPEND POSENC_FAMILY_NN_SOURCES ${posenc_family_OP} ${posenc_family_MODULE})
endmacro()

posenc_family(kerple  KERNEL kerple.cpp  OP ops/kerple.cpp  MODULE modules/kerple_bias.cpp)
posenc_family(fire    KERNEL fire.cpp    OP ops/fire.cpp    MODULE modules/fire_bias.cpp)
posenc_family(cope    KERNEL cope.cpp    OP ops/cope.cpp    MODULE modules/cope_bias.cpp)
posenc_family(dpb     KERNEL dpb.cpp     OP ops/dpb.cpp     MODULE modules/dpb_bias.cpp)
posenc_family(deberta KERNEL deberta.cpp OP ops/deberta.cpp MODULE modules/deberta_relative.cpp)
