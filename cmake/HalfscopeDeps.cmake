# Third-party dependencies: Debian packages (or the same files staged under .deps/root).
# Required: zlib, libpng, CLI11, nlohmann-json, OpenMP. Optional: cfitsio, libmseed.

find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(ZLIB REQUIRED)
find_package(PNG REQUIRED)
find_package(CLI11 CONFIG QUIET)
if(NOT TARGET CLI11::CLI11)
  find_path(HS_CLI11_INCLUDE CLI/CLI.hpp REQUIRED)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE ${HS_CLI11_INCLUDE})
endif()
find_package(nlohmann_json CONFIG QUIET)
if(NOT TARGET nlohmann_json::nlohmann_json)
  find_path(HS_JSON_INCLUDE nlohmann/json.hpp REQUIRED)
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  target_include_directories(nlohmann_json::nlohmann_json INTERFACE ${HS_JSON_INCLUDE})
endif()

# halfscope_optional_library(VAR NAME HEADER LIB): sets HALFSCOPE_HAS_<VAR> and target hs_dep_<name>.
function(halfscope_optional_library var mode header lib)
  string(TOLOWER ${var} lower)
  set(HALFSCOPE_HAS_${var} OFF PARENT_SCOPE)
  if(mode STREQUAL "OFF")
    return()
  endif()
  find_path(HS_${var}_INCLUDE ${header})
  find_library(HS_${var}_LIBRARY ${lib})
  if(HS_${var}_INCLUDE AND HS_${var}_LIBRARY)
    add_library(hs_dep_${lower} INTERFACE IMPORTED GLOBAL)
    target_include_directories(hs_dep_${lower} INTERFACE ${HS_${var}_INCLUDE})
    target_link_libraries(hs_dep_${lower} INTERFACE ${HS_${var}_LIBRARY})
    set(HALFSCOPE_HAS_${var} ON PARENT_SCOPE)
    message(STATUS "halfscope: ${lower} found (${HS_${var}_LIBRARY})")
  elseif(mode STREQUAL "ON")
    message(FATAL_ERROR "halfscope: ${lower} requested but ${header} / lib${lib} not found")
  else()
    message(STATUS "halfscope: ${lower} not found; that format reports Unsupported")
  endif()
endfunction()

halfscope_optional_library(FITS ${HALFSCOPE_WITH_FITS} fitsio.h cfitsio)
halfscope_optional_library(MSEED ${HALFSCOPE_WITH_MSEED} libmseed.h mseed)

# MPI for the scale-out over hosts (issue 9): C++ compiler wrapper flags through FindMPI.
set(HALFSCOPE_HAS_MPI OFF)
if(NOT HALFSCOPE_WITH_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS CXX QUIET)
  if(MPI_CXX_FOUND)
    set(HALFSCOPE_HAS_MPI ON)
    message(STATUS "halfscope: MPI found (${MPIEXEC_EXECUTABLE})")
  elseif(HALFSCOPE_WITH_MPI STREQUAL "ON")
    message(FATAL_ERROR "halfscope: HALFSCOPE_WITH_MPI=ON but no MPI found (apt-get install libopenmpi-dev openmpi-bin)")
  else()
    message(STATUS "halfscope: MPI not found; the MPI scale-out is not built")
  endif()
endif()

# CPU BLAS for the CPU ceilings and, later, the CPU Cholesky.
find_path(HS_CBLAS_INCLUDE cblas.h)
find_library(HS_BLAS_LIBRARY NAMES openblas blas)
set(HALFSCOPE_HAS_BLAS OFF)
if(HS_CBLAS_INCLUDE AND HS_BLAS_LIBRARY)
  set(HALFSCOPE_HAS_BLAS ON)
  add_library(hs_dep_blas INTERFACE IMPORTED GLOBAL)
  target_include_directories(hs_dep_blas INTERFACE ${HS_CBLAS_INCLUDE})
  target_link_libraries(hs_dep_blas INTERFACE ${HS_BLAS_LIBRARY})
endif()

# LAPACKE for the FP64 reference solves (the adaptive-optics reconstructor) and the CPU Cholesky.
find_path(HS_LAPACKE_INCLUDE lapacke.h)
find_library(HS_LAPACKE_LIBRARY lapacke)
set(HALFSCOPE_HAS_LAPACKE OFF)
if(HALFSCOPE_HAS_BLAS AND HS_LAPACKE_INCLUDE AND HS_LAPACKE_LIBRARY)
  set(HALFSCOPE_HAS_LAPACKE ON)
  add_library(hs_dep_lapacke INTERFACE IMPORTED GLOBAL)
  target_include_directories(hs_dep_lapacke INTERFACE ${HS_LAPACKE_INCLUDE})
  target_link_libraries(hs_dep_lapacke INTERFACE ${HS_LAPACKE_LIBRARY} ${HS_BLAS_LIBRARY})
else()
  message(STATUS "halfscope: lapacke not found; the CPU FP64 solves report Unsupported")
endif()

# FFTW (double and single precision) for the CPU FFT convolution.
find_path(HS_FFTW_INCLUDE fftw3.h REQUIRED)
find_library(HS_FFTW_LIBRARY fftw3 REQUIRED)
find_library(HS_FFTWF_LIBRARY fftw3f REQUIRED)
# FFTW's OpenMP libraries (the same Debian package, libfftw3-dev) split one large transform over
# the OpenMP threads (conv/fft_plan_cache.cpp); without them every transform runs on one thread.
# They come first: they call into the libraries above.
find_library(HS_FFTW_OMP_LIBRARY fftw3_omp)
find_library(HS_FFTWF_OMP_LIBRARY fftw3f_omp)
set(HALFSCOPE_HAS_FFTW_THREADS OFF)
set(_hs_fftw_libraries ${HS_FFTWF_LIBRARY} ${HS_FFTW_LIBRARY})
if(HS_FFTW_OMP_LIBRARY AND HS_FFTWF_OMP_LIBRARY)
  set(HALFSCOPE_HAS_FFTW_THREADS ON)
  list(PREPEND _hs_fftw_libraries ${HS_FFTWF_OMP_LIBRARY} ${HS_FFTW_OMP_LIBRARY})
else()
  message(STATUS "halfscope: FFTW's OpenMP libraries not found; CPU FFTs run on one thread each")
endif()
add_library(hs_dep_fftw INTERFACE IMPORTED GLOBAL)
target_include_directories(hs_dep_fftw INTERFACE ${HS_FFTW_INCLUDE})
target_link_libraries(hs_dep_fftw INTERFACE ${_hs_fftw_libraries})

# cuDNN for the `cudnn` convolution method (CUDA builds only). Looked for under
# HALFSCOPE_CUDNN_ROOT (cache variable or environment: a folder with include/cudnn.h and lib/, as
# the nvidia-cudnn Python wheel ships it, whose library is only libcudnn.so.9: its folder is
# `python3 -c "import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])"`), then the CUDA
# toolkit, then the system. HALFSCOPE_WITH_CUDNN (AUTO / ON / OFF) is resolved to ON or OFF here,
# as a normal variable, which config.hpp's HALFSCOPE_WITH_CUDNN reads.
set(HALFSCOPE_CUDNN_ROOT "$ENV{HALFSCOPE_CUDNN_ROOT}" CACHE PATH
    "Folder holding cuDNN's include/ and lib/ (e.g. the nvidia-cudnn wheel), empty to search")
# The mode is validated first, CUDA or not; the truthy / falsy spellings option() accepted
# (TRUE, 1, on, yes, ...) keep working, in any case.
string(TOUPPER "${HALFSCOPE_WITH_CUDNN}" _hs_cudnn_mode)
if(_hs_cudnn_mode MATCHES "^(ON|YES|TRUE|Y|1)$")
  set(_hs_cudnn_mode ON)
elseif(_hs_cudnn_mode MATCHES "^(OFF|NO|FALSE|N|0|)$")
  set(_hs_cudnn_mode OFF)
elseif(NOT _hs_cudnn_mode STREQUAL "AUTO")
  message(FATAL_ERROR "halfscope: HALFSCOPE_WITH_CUDNN must be ON, OFF or AUTO (or a CMake "
                      "boolean), found '${HALFSCOPE_WITH_CUDNN}'")
endif()
if(NOT HALFSCOPE_WITH_CUDA)
  if(_hs_cudnn_mode STREQUAL "ON")
    message(FATAL_ERROR "halfscope: HALFSCOPE_WITH_CUDNN=ON needs HALFSCOPE_WITH_CUDA=ON")
  endif()
  set(_hs_cudnn_mode OFF)
endif()
# find_path / find_library cache their results: forget them when the root changes, or the old
# cuDNN would stay in use.
if(NOT "${HALFSCOPE_CUDNN_ROOT}" STREQUAL "${_HS_CUDNN_ROOT_SEARCHED}")
  unset(HS_CUDNN_INCLUDE CACHE)
  unset(HS_CUDNN_LIBRARY CACHE)
  set(_HS_CUDNN_ROOT_SEARCHED "${HALFSCOPE_CUDNN_ROOT}" CACHE INTERNAL
      "HALFSCOPE_CUDNN_ROOT of the cached cuDNN search")
endif()
set(HALFSCOPE_WITH_CUDNN OFF)
if(NOT _hs_cudnn_mode STREQUAL "OFF")
  set(_hs_cudnn_hints)
  if(HALFSCOPE_CUDNN_ROOT)
    list(APPEND _hs_cudnn_hints "${HALFSCOPE_CUDNN_ROOT}")
  endif()
  list(APPEND _hs_cudnn_hints ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR})
  find_path(HS_CUDNN_INCLUDE cudnn.h HINTS ${_hs_cudnn_hints} ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES include)
  # The library of the same installation as the header first: its include/'s parent.
  set(_hs_cudnn_lib_hints ${_hs_cudnn_hints})
  if(HS_CUDNN_INCLUDE)
    get_filename_component(_hs_cudnn_prefix "${HS_CUDNN_INCLUDE}" DIRECTORY)
    list(PREPEND _hs_cudnn_lib_hints "${_hs_cudnn_prefix}")
  endif()
  find_library(HS_CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 HINTS ${_hs_cudnn_lib_hints}
               PATH_SUFFIXES lib lib64)
  if(HS_CUDNN_INCLUDE AND HS_CUDNN_LIBRARY)
    add_library(hs_dep_cudnn INTERFACE IMPORTED GLOBAL)
    target_include_directories(hs_dep_cudnn INTERFACE ${HS_CUDNN_INCLUDE})
    target_link_libraries(hs_dep_cudnn INTERFACE ${HS_CUDNN_LIBRARY})
    set(HALFSCOPE_WITH_CUDNN ON)
    message(STATUS "halfscope: cudnn found (${HS_CUDNN_LIBRARY}, headers in ${HS_CUDNN_INCLUDE})")
  elseif(_hs_cudnn_mode STREQUAL "ON")
    message(FATAL_ERROR "halfscope: cuDNN requested but cudnn.h / libcudnn not found "
                        "(set HALFSCOPE_CUDNN_ROOT to the folder holding include/ and lib/)")
  else()
    message(STATUS "halfscope: cudnn not found; method cudnn reports Unsupported")
  endif()
endif()
