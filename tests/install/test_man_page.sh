# The man page, docs/ptrain.1, against the program's own --help: the same
# commands; for each, the same usage line and the same flags with the same
# values (--model NAME), both ways; no flag named in the page's text that the
# program lacks; the version. A flag added to a --help without the page, or
# left in the page after leaving the program, fails here.
#   test_man_page.sh PTRAIN PAGE
set -euo pipefail
PTRAIN=$1
PAGE=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
errors=0
problem() { echo "FAIL: $*" >&2; errors=$((errors + 1)); }

# The page as text: font escapes dropped, \- as -, each line's spaces collapsed.
sed -e 's/\\f[BIRP]//g' -e 's/\\f([A-Z][A-Z]//g' -e 's/\\-/-/g' -e 's/\\&//g' \
    -e 's/[[:space:]][[:space:]]*/ /g' -e 's/ $//' "$PAGE" >"$TMP/page"

# help_flags: "--flag VALUE" or "--flag" for each option line of a --help
# (an option line starts with spaces and --name; its value, if any, is the
# upper-case word one space after it).
help_flags() { sed -nE 's/^ +(--[a-z0-9][a-z0-9-]*)( [A-Z][A-Z0-9_:.,|\/-]*)?( .*)?$/\1\2/p' | sort -u; }

# From the page: KEY<TAB>"--flag VALUE" for each .TP item that is a flag,
# KEY being "ptrain" under OPTIONS and the command under its .SS in COMMANDS;
# and usage KEY<TAB>LINE, the first text line of each command's .SS.
awk -v items="$TMP/items" -v usages="$TMP/usages" -v prose="$TMP/prose" '
  /^\.SH / { sh = $0; sub(/^\.SH "?/, "", sh); sub(/"$/, "", sh); key = (sh == "OPTIONS") ? "ptrain" : ""; want_usage = 0; next }
  /^\.SS / { ss = $0; sub(/^\.SS "?/, "", ss); sub(/"$/, "", ss); if (sh == "COMMANDS") { key = ss; want_usage = 1 } next }
  /^\.TP/ { header = 1; next }
  /^\.\\"/ { next }
  {
    line = $0
    if (header) {
      header = 0
      h = line; sub(/^\.[BIR]+ /, "", h); gsub(/"/, "", h); gsub(/ +/, " ", h); sub(/^ /, "", h); sub(/ $/, "", h)
      if (h ~ /^--[a-z0-9]/ && key != "") print key "\t" h > items
    }
    if (want_usage && line !~ /^\./) { print key "\t" line > usages; want_usage = 0 }
    # Flags named anywhere in the text, but for the library and the other
    # programs (pkg-config) the last sections name.
    if (sh != "LIBRARY" && sh != "SEE ALSO") {
      s = line
      while (match(s, /--[a-z0-9][a-z0-9-]*/)) { print substr(s, RSTART, RLENGTH) > prose; s = substr(s, RSTART + RLENGTH) }
    }
  }
' "$TMP/page"
touch "$TMP/items" "$TMP/usages" "$TMP/prose"

# The version on the page's title line.
version=$("$PTRAIN" --version)
grep -q "^\.TH PTRAIN 1 .*\"$version\"" "$PAGE" || problem "the .TH line of $PAGE does not name '$version' (ptrain --version)"

# The commands: those of ptrain --help, and the page's .SS sections under COMMANDS.
"$PTRAIN" --help >"$TMP/help_ptrain"
sed -n '/^commands:/,/^$/p' "$TMP/help_ptrain" | sed -nE 's/^  ([a-z]+)( [a-z]+)?  .*/\1/p' | sort -u >"$TMP/commands"
[[ -s $TMP/commands ]] || problem "no commands found in ptrain --help"
cut -f1 "$TMP/usages" | sort -u >"$TMP/page_commands"
for c in $(comm -23 "$TMP/commands" "$TMP/page_commands"); do problem "command '$c' (ptrain --help) has no .SS section under COMMANDS in $PAGE"; done
for c in $(comm -13 "$TMP/commands" "$TMP/page_commands"); do problem "$PAGE has a section for '$c', which ptrain --help does not list"; done

# The synopsis and the top-level options.
usage=$(sed -n 's/^usage: //p' "$TMP/help_ptrain")
grep -A1 -x '\.SH SYNOPSIS' "$TMP/page" | tail -n 1 | grep -qxF -- "$usage" || problem "SYNOPSIS: expected '$usage' (ptrain --help) as its first line"

compare() {  # compare KEY HELPFILE
  local key=$1 help=$2
  help_flags <"$help" >"$TMP/want"
  awk -F '\t' -v k="$key" '$1 == k { print $2 }' "$TMP/items" | sort -u >"$TMP/have"
  local n=0 cmd="ptrain $key" section="the .SS $key section"
  [[ $key == ptrain ]] && cmd=ptrain section="the OPTIONS section"
  while IFS= read -r f; do problem "'$cmd --help' has '$f'; $section of $PAGE lacks it"; n=1; done < <(comm -23 "$TMP/want" "$TMP/have")
  while IFS= read -r f; do problem "$section of $PAGE has '$f'; '$cmd --help' lacks it"; n=1; done < <(comm -13 "$TMP/want" "$TMP/have")
  [[ $n == 0 ]] && echo "ok: $key: $(wc -l <"$TMP/want") flags as in --help"
  return 0
}
compare ptrain "$TMP/help_ptrain"
cp "$TMP/help_ptrain" "$TMP/all_help"

for c in $(cat "$TMP/commands"); do
  if ! "$PTRAIN" "$c" --help >"$TMP/help_$c" 2>"$TMP/err"; then
    problem "ptrain $c --help failed: $(cat "$TMP/err")"
    continue
  fi
  cat "$TMP/help_$c" >>"$TMP/all_help"
  usage=$(sed -n 's/^usage: //p' "$TMP/help_$c")
  page_usage=$(awk -F '\t' -v k="$c" '$1 == k { print $2 }' "$TMP/usages")
  [[ $usage == "$page_usage" ]] || problem "$c: usage line: --help has '$usage', the page '$page_usage'"
  compare "$c" "$TMP/help_$c"
done

# Every flag the page names exists in some --help.
help_flags <"$TMP/all_help" | cut -d' ' -f1 | sort -u >"$TMP/all_flags"
sort -u "$TMP/prose" >"$TMP/prose_flags"
for f in $(comm -13 "$TMP/all_flags" "$TMP/prose_flags"); do problem "$PAGE names '$f', which no ptrain --help lists"; done

if ((errors)); then
  echo "$errors difference(s) between $PAGE and ptrain's --help" >&2
  exit 1
fi
echo "ok: $PAGE agrees with ptrain --help and $(wc -l <"$TMP/commands") commands' --help"
