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

# `dlscale_split_cold(target COLD HOT_REGEX)`: TARGET's units whose path does
# not match HOT_REGEX move to a new object library COLD, compiled at -O1
# (dlscale_cold), whose objects TARGET's archive holds; TARGET keeps the
# others at the build type's level. COLD needs TARGET's compile settings
# (dlscale_libtorch_settings in src/CMakeLists.txt).
function(dlscale_split_cold target cold hot_regex)
  get_target_property(sources ${target} SOURCES)
  set(hot)
  set(cold_units)
  foreach(src IN LISTS sources)
    if(src MATCHES "${hot_regex}")
      list(APPEND hot ${src})
    else()
      list(APPEND cold_units ${src})
    endif()
  endforeach()
  add_library(${cold} OBJECT ${cold_units})
  dlscale_cold(${cold})
  set_property(TARGET ${target} PROPERTY SOURCES ${hot} $<TARGET_OBJECTS:${cold}>)
endfunction()

# A target off the training step's hot path (the command line, sweeps,
# reports, the launchers and clusters) compiled at -O1 instead of the build
# type's -O3: its units take about 0.7x the compile time, and its commands
# run in milliseconds either way (bench/README.md, "Cold code at -O1"); so do
# the LibTorch library's cold half (dlscale_split_cold) and dlscale-torch's
# commands. The LibTorch library's hot half, the data pipeline
# (dlscale_data), the core helpers and the predictor (whose loops cover up
# to 100,000,000 workers) keep -O3.
function(dlscale_cold target)
  target_compile_options(${target} PRIVATE $<$<NOT:$<CONFIG:Debug>>:-O1>)
endfunction()
