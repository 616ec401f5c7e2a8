# The encoding families that are one unit each: a kernel (src/kernels/<name>.cpp)
# and one torch-layer file (src/nn/families/<name>.cpp: its op, its contract,
# its typed front end and its descriptor). Adding such a family adds one line
# here; src/kernels and src/nn take these sources from the two lists. A family
# with no kernel of its own (its terms from existing ops) names only NN.
set(POSENC_FAMILY_KERNEL_SOURCES)
set(POSENC_FAMILY_NN_SOURCES)
macro(posenc_family name)
  cmake_parse_arguments(posenc_family "" "KERNEL" "" ${ARGN})
  if(posenc_family_KERNEL)
    list(APPEND POSENC_FAMILY_KERNEL_SOURCES ${posenc_family_KERNEL})
  endif()
  list(APPEND POSENC_FAMILY_NN_SOURCES families/${name}.cpp)
endmacro()

posenc_family(sinusoidal)  # its kernels: the shared sinusoidal*.cpp
posenc_family(learned)
posenc_family(rope)     # its kernels: the shared rope*.cpp
posenc_family(mrope)    # axial RoPE and M-RoPE, on the shared rope kernels
posenc_family(query_temperature)
posenc_family(alibi)    # its kernels: the shared alibi.cpp
posenc_family(t5)       # its kernels: the shared t5.cpp
posenc_family(kerple  KERNEL kerple.cpp)
posenc_family(fire    KERNEL fire.cpp)
posenc_family(cope    KERNEL cope.cpp)
posenc_family(dpb     KERNEL dpb.cpp)
posenc_family(shaw)               # relative vectors, on the shared relative kernels
posenc_family(sinusoidal_relative)
posenc_family(transformer_xl)
posenc_family(relative_2d)        # its kernel: the shared relative_2d.cpp
posenc_family(deberta KERNEL deberta.cpp)
