# Generates build_info.cpp with the git revision at *build* time (not only at
# configure time), rewriting it only when the revision changes.
set(DLSCALE_BUILD_INFO_CPP ${CMAKE_BINARY_DIR}/generated/build_info.cpp)
add_custom_target(dlscale_build_info
  COMMAND ${CMAKE_COMMAND}
          -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
          -DOUTPUT=${DLSCALE_BUILD_INFO_CPP}
          -DVERSION=${PROJECT_VERSION}
          -DBUILD_TYPE=${CMAKE_BUILD_TYPE}
          -DCOMPILER=${CMAKE_CXX_COMPILER_ID}-${CMAKE_CXX_COMPILER_VERSION}
          -P ${CMAKE_SOURCE_DIR}/cmake/write_build_info.cmake
  BYPRODUCTS ${DLSCALE_BUILD_INFO_CPP}
  COMMENT "Checking git revision"
  VERBATIM)
# Also write it now so that the file exists when targets are generated.
execute_process(COMMAND ${CMAKE_COMMAND}
                -DSOURCE_DIR=${CMAKE_SOURCE_DIR} -DOUTPUT=${DLSCALE_BUILD_INFO_CPP}
                -DVERSION=${PROJECT_VERSION} -DBUILD_TYPE=${CMAKE_BUILD_TYPE}
                -DCOMPILER=${CMAKE_CXX_COMPILER_ID}-${CMAKE_CXX_COMPILER_VERSION}
                -P ${CMAKE_SOURCE_DIR}/cmake/write_build_info.cmake)
