#!/usr/bin/env bash
# Renders the documentation's diagrams from their committed sources:
#   docs/architecture.dot -> docs/architecture.svg   (Graphviz dot)
# Needs Debian's `graphviz` (scripts/setup.sh installs it). Commit the SVGs
# it writes together with their sources.
#   bash scripts/diagrams.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
command -v dot >/dev/null || { echo "diagrams.sh: no 'dot': apt-get install graphviz" >&2; exit 2; }
for src in "$root"/docs/*.dot; do
  svg="${src%.dot}.svg"
  dot -Tsvg "$src" -o "$svg"
  echo "diagrams.sh: ${svg#"$root"/}"
done
