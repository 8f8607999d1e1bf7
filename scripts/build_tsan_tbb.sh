#!/usr/bin/env bash
# Builds oneTBB from Debian's own source package with -fsanitize=thread into
# build/deps/tbb-tsan (once; later runs reuse it).
#
# Why: Debian's libtbb is not instrumented, so ThreadSanitizer cannot see the
# happens-before edges of task spawn and join inside it and reports false
# races in every parallel_for. Suppressing them would also hide ours. With an
# instrumented oneTBB the TSan run needs no suppression at all.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=$root/build/deps/tbb-tsan
if [ -f "$prefix/lib/cmake/TBB/TBBConfig.cmake" ]; then
  echo "tsan-tbb: present at $prefix"
  exit 0
fi
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"

version=$(dpkg-query -W -f='${source:Version}' libtbb-dev)
work=$root/build/deps/tbb-src
mkdir -p "$work"
cd "$work"
if ! ls onetbb_*.orig.tar.* >/dev/null 2>&1; then
  # Source packages come from the same Debian mirror as the binaries.
  if ! grep -rqs "deb-src" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
    printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$codename" | $sudo tee /etc/apt/sources.list.d/broadphase-src.sources >/dev/null
  fi
  $sudo apt-get update -qq
  apt-get source -qq --download-only "onetbb=$version" 2>&1 | grep -v "unsandboxed" || true
fi
rm -rf src && mkdir src && tar xf onetbb_*.orig.tar.* -C src --strip-components=1
cmake -S src -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTBB_SANITIZE=thread -DTBB_TEST=OFF \
  -DTBB_EXAMPLES=OFF -DTBBMALLOC_BUILD=OFF -DTBB_STRICT=OFF -DCMAKE_INSTALL_PREFIX="$prefix" >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
cmake --install build >/dev/null
echo "tsan-tbb: built oneTBB $version with ThreadSanitizer into $prefix"
