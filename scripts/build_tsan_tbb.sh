#!/usr/bin/env bash
# Builds oneTBB from Debian's own source package with -fsanitize=thread, once
# per oneTBB version, and prints the folder of its TBBConfig.cmake (the
# TBB_DIR of a ThreadSanitizer build) on stdout; everything else goes to
# stderr.
#
# Why: Debian's libtbb is not instrumented, so ThreadSanitizer cannot see the
# happens-before edges of task spawn and join inside it and reports false
# races in every parallel_for. Suppressing them would also hide ours. With an
# instrumented oneTBB the TSan run needs no suppression at all.
#
# Where: $BP_DEPS_DIR/tbb-tsan-<version>, by default under ~/.cache/broadphase,
# outside the clone, so that a fresh clone on the same machine (CI's) reuses
# it. It is keyed by the installed libtbb-dev's version: an upgrade builds
# anew.
set -euo pipefail
deps=${BP_DEPS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/broadphase}
version=$(dpkg-query -W -f='${source:Version}' libtbb-dev)
prefix=$deps/tbb-tsan-$version
if [ -f "$prefix/lib/cmake/TBB/TBBConfig.cmake" ]; then
  echo "tsan-tbb: present at $prefix" >&2
  echo "$prefix/lib/cmake/TBB"
  exit 0
fi
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"

work=$deps/tbb-src-$version
mkdir -p "$work"
cd "$work"
if ! ls onetbb_*.orig.tar.* >/dev/null 2>&1; then
  # Source packages come from the same Debian mirror as the binaries.
  if ! grep -rqs "deb-src" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
    printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$codename" | $sudo tee /etc/apt/sources.list.d/broadphase-src.sources >/dev/null
  fi
  $sudo apt-get update -qq >&2
  { apt-get source -qq --download-only "onetbb=$version" 2>&1 | grep -v "unsandboxed" || true; } >&2
fi
rm -rf src build && mkdir src && tar xf onetbb_*.orig.tar.* -C src --strip-components=1
cmake -S src -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTBB_SANITIZE=thread -DTBB_TEST=OFF \
  -DTBB_EXAMPLES=OFF -DTBBMALLOC_BUILD=OFF -DTBB_STRICT=OFF -DCMAKE_INSTALL_PREFIX="$prefix" >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
# Installed into a scratch folder first and moved into place whole, so that an
# interrupted build never leaves a prefix that looks complete.
rm -rf "$prefix.partial"
cmake --install build --prefix "$prefix.partial" >/dev/null
rm -rf "$prefix" && mv "$prefix.partial" "$prefix"
rm -rf src build
echo "tsan-tbb: built oneTBB $version with ThreadSanitizer into $prefix" >&2
echo "$prefix/lib/cmake/TBB"
