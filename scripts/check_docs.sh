#!/usr/bin/env bash
# Checks the documentation (README.md, docs/*.md, docs/decisions/*.md,
# bench/README.md):
#  1. every relative link resolves: the file exists, and a #fragment names a
#     heading of that file (GitHub's anchors: lower case, punctuation
#     dropped, spaces to hyphens);
#  2. nothing reads as a journal: no numbered work session, issue number,
#     or the work session before or after, in the docs and scripts (the
#     pattern below spells the words so that this file does not match it).
# Prints each problem and exits 1 if there is any.
#   bash scripts/check_docs.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
problems=0

anchors_of() {  # the GitHub anchors of a markdown file's headings, one a line
  grep -E '^#{1,6} ' "$1" | sed -E 's/^#+ +//' | tr 'A-Z' 'a-z' |
    sed -E 's/[^a-z0-9 _-]//g; s/ /-/g'
}

docs=(README.md bench/README.md docs/*.md docs/decisions/*.md)
for doc in "${docs[@]}"; do
  dir=$(dirname "$doc")
  # Inline links and images, ](target) or ](target "title"), outside code.
  while IFS= read -r target; do
    [[ -z "$target" ]] && continue
    case "$target" in
      http://*|https://*|mailto:*) continue ;;
    esac
    path="${target%%#*}"
    frag=""
    [[ "$target" == *"#"* ]] && frag="${target#*#}"
    if [[ -z "$path" ]]; then
      file="$doc"
    else
      file="$dir/$path"
    fi
    if [[ ! -e "$file" ]]; then
      echo "$doc: broken link '$target' ($file does not exist)"
      problems=$((problems + 1))
      continue
    fi
    if [[ -n "$frag" && "$file" == *.md ]] && ! anchors_of "$file" | grep -qx -- "$frag"; then
      echo "$doc: link '$target': no heading for #$frag in $file"
      problems=$((problems + 1))
    fi
  done < <(awk '/^```/ { fenced = !fenced; next } !fenced' "$doc" | sed -E 's/`[^`]*`//g' |
           grep -oE '\]\([^) ]+' | sed -E 's/^\]\(//')
done

if git grep -n -I -E '[Ss]ession [0-9]+|[Ii]ssue #[0-9]+|next [s]ession|this [s]ession' \
     -- README.md docs scripts bench/README.md ':!scripts/check_docs.sh'; then
  echo "(journal words above: state what holds, in the present tense)"
  problems=$((problems + 1))
fi

if (( problems > 0 )); then
  echo "check_docs.sh: $problems problem(s)"
  exit 1
fi
echo "check_docs.sh: links resolve, no journal words"
