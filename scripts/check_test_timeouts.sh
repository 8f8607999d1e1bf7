#!/usr/bin/env bash
# Fails when a test of the build folder $1 has no TIMEOUT property: without
# one a hung test runs until CI's own limit and the whole run is lost.
set -euo pipefail
cd "$1"
ctest --show-only=json-v1 | python3 -c '
import json, sys
tests = json.load(sys.stdin)["tests"]
bare = [t["name"] for t in tests
        if not any(p["name"] == "TIMEOUT" for p in t.get("properties", []))]
if bare:
    sys.exit("tests without a TIMEOUT: " + ", ".join(bare))
print(f"check_test_timeouts: all {len(tests)} tests have a TIMEOUT")
'
