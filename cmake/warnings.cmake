# Warnings for our own targets only (LibTorch headers are included as SYSTEM).
function(dlscale_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow
                                           -Wnon-virtual-dtor -Wno-unused-parameter)
endfunction()
