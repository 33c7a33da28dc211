# CUDA and NCCL (docs/gpu.md). Sets DLSCALE_WITH_CUDA when the LibTorch found
# was built with CUDA, and DLSCALE_WITH_NCCL when NCCL is found beside it.
# A CPU build (Debian's LibTorch) still compiles the NCCL communicator as an
# object library when the CUDA toolkit's headers (cuda_runtime_api.h, nccl.h)
# are installed, so it cannot rot unseen: DLSCALE_CUDA_COMPILE_CHECK.
set(DLSCALE_WITH_CUDA OFF)
set(DLSCALE_WITH_NCCL OFF)
set(DLSCALE_CUDA_COMPILE_CHECK OFF)
if(TARGET c10_cuda OR TORCH_CUDA_LIBRARIES)
  set(DLSCALE_WITH_CUDA ON)
  find_package(CUDAToolkit REQUIRED)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${DLSCALE_NCCL_ROOT}/include)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${DLSCALE_NCCL_ROOT}/lib)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(DLSCALE_WITH_NCCL ON)
    message(STATUS "dlscale: CUDA LibTorch ${Torch_VERSION}, NCCL ${NCCL_LIBRARY}")
  else()
    message(WARNING "dlscale: CUDA LibTorch without NCCL (set DLSCALE_NCCL_ROOT); --backend nccl disabled")
  endif()
else()
  find_path(DLSCALE_CUDA_INCLUDE_DIR cuda_runtime_api.h
            HINTS /usr/local/cuda/include /usr/local/cuda/targets/x86_64-linux/include)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${DLSCALE_CUDA_INCLUDE_DIR} ${DLSCALE_NCCL_ROOT}/include)
  if(DLSCALE_CUDA_INCLUDE_DIR AND NCCL_INCLUDE_DIR)
    set(DLSCALE_CUDA_COMPILE_CHECK ON)
    message(STATUS "dlscale: CPU build; CUDA/NCCL sources compile-checked against ${DLSCALE_CUDA_INCLUDE_DIR}")
  endif()
endif()
