# fusion_adapt_pypi_torch(): builds against the LibTorch of PyPI's torch wheel (scripts/build-cuda.sh)
# without taking anything else from the wheel. A no-op for Debian's LibTorch (/usr/include, /usr/lib).
#
# 1. Headers: LibTorch's own headers, not the third-party ones beside them.
# PyPI's torch wheel installs its headers in torch/include together with the headers of libraries
# it carries inside its own .so files: fmt 12, oneDNN 3.x (dnnl.hpp, oneapi/), protobuf
# (google/protobuf), pybind11 and more. On the include path they shadow Debian's: spdlog (built
# on Debian's fmt 9) fails to compile, and worse, models/onednn would compile against oneDNN 3.x
# headers while linking Debian's libdnnl.so.2 (2.6), and the gRPC TUs against another protobuf.
# This replaces the torch targets' include directory with an overlay in the build tree that
# links to LibTorch's own folders only (ATen, c10, caffe2, torch), so every other header comes
# from the system as in the Debian build.
# 2. c10: TorchConfig's find_library(c10) looks in the system directories before the wheel's
# torch/lib, so with Debian's libtorch-dev installed c10_LIBRARY is Debian's 1.13 libc10: it is
# set to the wheel's.
# 3. No Debian oneDNN: FUSION_WITH_ONEDNN is set OFF (models/onednn/CMakeLists.txt says why).
# 4. The CUDA libraries libtorch_cuda.so needs (NCCL, cuDNN, cuBLAS... in the wheel's nvidia/*/lib,
# found at run time through its own RPATH) are named to the linker with -rpath-link, so that it
# checks libtorch_cuda.so against those and not against the toolkit's older NCCL.
function(fusion_adapt_pypi_torch)
  set(real "${TORCH_INSTALL_PREFIX}/include")
  # Debian's LibTorch: its headers are in /usr/include beside every other library's.
  if(real MATCHES "^/usr(/local)?/include$" OR NOT EXISTS "${real}/ATen")
    return()
  endif()
  set(FUSION_WITH_ONEDNN OFF PARENT_SCOPE)
  if(EXISTS "${TORCH_INSTALL_PREFIX}/lib/libc10.so")
    set(c10_LIBRARY "${TORCH_INSTALL_PREFIX}/lib/libc10.so" CACHE FILEPATH "" FORCE)
  endif()
  file(GLOB wheel_libs LIST_DIRECTORIES true "${TORCH_INSTALL_PREFIX}/../nvidia/*/lib")
  if(wheel_libs)
    list(JOIN wheel_libs ":" wheel_libs)
    add_link_options("LINKER:-rpath-link,${wheel_libs}")
  endif()
  set(overlay "${CMAKE_BINARY_DIR}/torch-include")
  file(MAKE_DIRECTORY "${overlay}")
  foreach(entry ATen c10 caffe2 torch)
    if(EXISTS "${real}/${entry}" AND NOT EXISTS "${overlay}/${entry}")
      file(CREATE_LINK "${real}/${entry}" "${overlay}/${entry}" SYMBOLIC)
    endif()
  endforeach()
  foreach(target c10 c10_cuda torch_cpu torch_cuda torch headeronly)
    if(NOT TARGET ${target})
      continue()
    endif()
    foreach(property INTERFACE_INCLUDE_DIRECTORIES INTERFACE_SYSTEM_INCLUDE_DIRECTORIES)
      get_target_property(dirs ${target} ${property})
      if(dirs)
        string(REPLACE "${real}" "${overlay}" dirs "${dirs}")
        set_target_properties(${target} PROPERTIES ${property} "${dirs}")
      endif()
    endforeach()
  endforeach()
  string(REPLACE "${real}" "${overlay}" dirs "${TORCH_INCLUDE_DIRS}")
  set(TORCH_INCLUDE_DIRS "${dirs}" PARENT_SCOPE)
  message(STATUS "fusiond: PyPI LibTorch: headers through ${overlay}; c10 ${c10_LIBRARY}; -rpath-link ${wheel_libs}")
endfunction()
