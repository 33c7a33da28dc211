# Warnings for our own targets only (LibTorch headers are included as SYSTEM).
function(dlscale_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow
                                           -Wnon-virtual-dtor -Wno-unused-parameter)
endfunction()

# A target's units compiled DLSCALE_UNITY_BATCH at a time: each unit that
# includes LibTorch spends about 20 s of CPU parsing it, most of its compile
# time, and a torch-free one most of its 5-20 s in fmt, nlohmann/json and
# CLI11; a batch pays that once (bench/README.md, "A newcomer's build").
# Names in a unit's anonymous namespace must then be unique within its
# batch.
# `dlscale_unity(target BATCH)` takes BATCH units a batch instead: a
# torch-free library takes DLSCALE_UNITY_BATCH_TORCH_FREE, since its units
# share only those lighter headers, so a larger batch saves their parse more
# often and costs a rebuild little.
function(dlscale_unity target)
  set(batch ${DLSCALE_UNITY_BATCH})
  if(ARGC GREATER 1)
    set(batch ${ARGV1})
  endif()
  if(DLSCALE_UNITY)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${batch})
  endif()
endfunction()

# `dlscale_unity_grouped(target BATCH SMALL_BATCH SMALL_REGEX)`: the units
# whose path matches SMALL_REGEX in batches of SMALL_BATCH, the others in
# batches of BATCH, each kind in the order listed. The LibTorch library puts
# the trainer's units (the ones edited most) in small batches, so that a
# rebuild after touching one stays short, and the rest (models,
# communicators, strategies) in large ones, so that a fresh build parses
# LibTorch's header fewer times. Units marked SKIP_UNITY_BUILD_INCLUSION
# still compile alone.
function(dlscale_unity_grouped target batch small_batch small_regex)
  if(NOT DLSCALE_UNITY)
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  set(batch_large ${batch})
  set(batch_small ${small_batch})
  set(count_large 0)
  set(count_small 0)
  foreach(src IN LISTS sources)
    get_source_file_property(skip ${src} SKIP_UNITY_BUILD_INCLUSION)
    if(skip OR NOT src MATCHES "\\.cpp$")
      continue()
    endif()
    set(kind large)
    if(src MATCHES "${small_regex}")
      set(kind small)
    endif()
    math(EXPR index "${count_${kind}} / ${batch_${kind}}")
    math(EXPR count_${kind} "${count_${kind}} + 1")
    set_source_files_properties(${src} PROPERTIES UNITY_GROUP ${kind}_${index})
  endforeach()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE GROUP)
endfunction()

# A target off the training step's hot path (the command line, sweeps,
# reports, the launchers and clusters) compiled at -O1 instead of the build
# type's -O3: its units take about 0.7x the compile time, and its commands
# run in milliseconds either way (bench/README.md, "Cold code at -O1"). The
# library that trains (dlscale), the data pipeline (dlscale_data), the core
# helpers and the predictor (whose loops cover up to 100,000,000 workers)
# keep -O3.
function(dlscale_cold target)
  target_compile_options(${target} PRIVATE $<$<NOT:$<CONFIG:Debug>>:-O1>)
endfunction()
